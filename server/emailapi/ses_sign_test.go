package emailapi_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// signedSES is a SendEmail request signed as an AWS SDK signs it, with the
// inbox id as access key id and secret as the secret access key.
func signedSES(e *env, secret, body string, at time.Time) *http.Request {
	e.t.Helper()
	return signedSESAs(e, e.boot.Inbox.ID, secret, body, at)
}

func signedSESAs(e *env, accessKey, secret, body string, at time.Time) *http.Request {
	e.t.Helper()
	return signedSESAt(e, "/v2/email/outbound-emails", accessKey, secret, body, at)
}

// signedSESAt is a request to path signed as signedSESAs signs it.
func signedSESAt(e *env, path, accessKey, secret, body string, at time.Time) *http.Request {
	e.t.Helper()
	req, err := http.NewRequest("POST", e.base+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	sum := sha256.Sum256([]byte(body))
	err = v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: accessKey, SecretAccessKey: secret},
		req, hex.EncodeToString(sum[:]), "ses", "us-east-1", at)
	if err != nil {
		e.t.Fatal(err)
	}
	return req
}

// signedSESv1 is an Amazon SES v1 (Query API) request: a form posted to
// /, signed as the v1 SDKs sign it.
func signedSESv1(e *env, secret string, form url.Values) *http.Request {
	e.t.Helper()
	return signedSESv1Body(e, secret, form.Encode())
}

// signedSESv1Body is signedSESv1 with the form's body as it is.
func signedSESv1Body(e *env, secret, body string) *http.Request {
	e.t.Helper()
	return signedSESv1Query(e, secret, "POST", "", body)
}

// signedSESv1Query is an SES v1 request with parameters in its query
// string and, when body is not empty, a form body, signed as the SDKs
// sign.
func signedSESv1Query(e *env, secret, method, query, body string) *http.Request {
	e.t.Helper()
	target := e.base + "/"
	if query != "" {
		target += "?" + query
	}
	req, err := http.NewRequest(method, target, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	} else {
		req.Body, req.ContentLength = http.NoBody, 0
	}
	sum := sha256.Sum256([]byte(body))
	err = v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: e.boot.Inbox.ID, SecretAccessKey: secret},
		req, hex.EncodeToString(sum[:]), "ses", "us-east-1", time.Now())
	if err != nil {
		e.t.Fatal(err)
	}
	return req
}
