package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"unicode"
)

// maxAnswer bounds a response body roomcastctl reads (streams excepted).
const maxAnswer = 8 << 20

// serverError is an error answer: the status and the gateway's {"error","message"}.
type serverError struct {
	Status     int
	Code       string // the body's "error"; "" when the answer was not roomcast's JSON
	Message    string
	RetryAfter string // the Retry-After header, if any
}

func (e *serverError) Error() string {
	var b strings.Builder
	b.WriteString(strconv.Itoa(e.Status))
	if e.Code != "" {
		b.WriteString(" " + e.Code)
	} else {
		b.WriteString(" " + http.StatusText(e.Status))
	}
	if e.Message != "" {
		b.WriteString(": " + e.Message)
	}
	if e.RetryAfter != "" {
		b.WriteString(" (retry after " + e.RetryAfter + "s)")
	}
	return b.String()
}

// unreachableError is a request that got no answer: exit code 3.
type unreachableError struct{ err error }

func (e *unreachableError) Error() string { return "no answer: " + e.err.Error() }
func (e *unreachableError) Unwrap() error { return e.err }

// readError builds the serverError of a non-2xx answer from its (bounded) body.
func readError(resp *http.Response) *serverError {
	e := &serverError{Status: resp.StatusCode, RetryAfter: printable(resp.Header.Get("Retry-After"), 32)}
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var body struct {
		Code    string `json:"error"`
		Message string `json:"message"`
	}
	if json.Unmarshal(raw, &body) == nil && body.Code != "" {
		e.Code, e.Message = printable(body.Code, 64), printable(body.Message, 512)
	}
	return e
}

// printable cuts s to n bytes and replaces control characters, so that an answer
// cannot drive the terminal it is printed on.
func printable(s string, n int) string {
	if len(s) > n {
		s = s[:n] + "…"
	}
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return '?'
		}
		return r
	}, s)
}

// request is one call to the gateway.
type request struct {
	method string
	url    string
	token  string // sent as Authorization: Bearer when not empty
	header http.Header
	body   []byte
}

// do sends r and returns the 2xx answer's body, a *serverError for any other status,
// or an *unreachableError when no answer came.
func (c *cli) do(ctx context.Context, r request) ([]byte, error) {
	var body io.Reader
	if r.body != nil {
		body = bytes.NewReader(r.body)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, r.url, body)
	if err != nil {
		return nil, err
	}
	for k, v := range r.header {
		req.Header[k] = v
	}
	req.Header.Set("Accept", "application/json")
	if r.token != "" {
		req.Header.Set("Authorization", "Bearer "+r.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &unreachableError{err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, readError(resp)
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	switch {
	case err != nil:
		return nil, &unreachableError{err: err}
	case len(raw) > maxAnswer:
		return nil, fmt.Errorf("answer larger than %d bytes", maxAnswer)
	}
	return raw, nil
}

// admin calls the admin listener with the admin token.
func (c *cli) admin(ctx context.Context, method, path string) ([]byte, error) {
	return c.do(ctx, request{method: method, url: c.adminURL + path, token: c.adminToken})
}

// printJSON writes raw (one JSON value) compacted on one line.
func (c *cli) printJSON(raw []byte) error {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return errors.New("the answer is not JSON")
	}
	b.WriteByte('\n')
	_, err := c.io.out.Write(b.Bytes())
	return err
}

// headerSafe reports whether s is 1 to n bytes of visible ASCII, which a header
// carries as is.
func headerSafe(s string, n int) bool {
	if s == "" || len(s) > n {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f {
			return false
		}
	}
	return true
}
