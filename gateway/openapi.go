package gateway

import (
	_ "embed"
	"net/http"
)

// openAPIDoc is the OpenAPI 3.1 description of both listeners' routes, their
// answers and the error body. The gateway's tests keep it honest: every route of
// the routers is described and every described path is routed
// (TestOpenAPIRoutes), and the tests' requests and answers are validated against
// it.
//
//go:embed openapi.yaml
var openAPIDoc []byte

// OpenAPI returns the OpenAPI 3.1 description of the gateway's HTTP API (a copy).
func OpenAPI() []byte { return append([]byte(nil), openAPIDoc...) }

// openAPI serves GET /openapi.yaml on the public listener.
func openAPI(w http.ResponseWriter, _ *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "application/yaml; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(openAPIDoc)
}
