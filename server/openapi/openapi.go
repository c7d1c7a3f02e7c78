// Package openapi holds the OpenAPI 3.1 document of the read API, served at
// /api/v1/schema/, and a Validator that checks real HTTP exchanges against it
// so that tests of the API can prove the document and the server agree.
package openapi

import _ "embed"

// Document is the OpenAPI 3.1 document (JSON) of every /api/v1 route.
//
//go:embed openapi.json
var Document []byte
