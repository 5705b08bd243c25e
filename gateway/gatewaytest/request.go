package gatewaytest

import (
	"context"
	"io"
	"net/http"
)

// NewRequest is an http.Request with headers given as name, value pairs; the name
// "Host" sets the Host the server sees (Request.Host) rather than a header field,
// which net/http would ignore.
func NewRequest(ctx context.Context, method, url string, body io.Reader, headers ...string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		return nil, err
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i] == "Host" {
			req.Host = headers[i+1]
			continue
		}
		req.Header.Set(headers[i], headers[i+1])
	}
	return req, nil
}
