// Package openapi holds the OpenAPI 3.1 document of the read API, served at
// /api/v1/schema/. Tests check real exchanges against it with openapitest.
package openapi

import _ "embed"

// Document is the OpenAPI 3.1 document (JSON) of every /api/v1 route.
//
//go:embed openapi.json
var Document []byte
