package web

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"time"
)

// static holds every file the two sites serve:
//
//	static/roomcast.js, roomcast.d.ts  the client module, public site only
//	static/public/                     the demo page and its assets
//	static/admin/                      the operator page and its assets
//	static/shared/                     style sheet and icon used by both
//
//go:embed static
var static embed.FS

// Cache policies. Pages are always revalidated (cheap, thanks to the ETag) so
// a new release shows at once; the module and the assets may be reused for a
// few minutes without asking.
const (
	cachePage  = "no-cache"
	cacheAsset = "public, max-age=300"
)

// contentTypes maps file extensions to the Content-Type the sites send. Only
// these extensions are served; anything else in static/ is a build mistake
// and makes package initialisation panic.
var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".ts":   "application/typescript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".svg":  "image/svg+xml",
}

// pageCSP is the Content-Security-Policy of both pages: nothing from another
// origin, no inline script or style, and no framing.
const pageCSP = "default-src 'self'; script-src 'self'; style-src 'self'; " +
	"img-src 'self' data:; connect-src 'self'; base-uri 'none'; " +
	"form-action 'none'; frame-ancestors 'none'"

// file is one embedded file, ready to serve.
type file struct {
	name  string // path inside static/, for ServeContent and errors
	body  []byte
	ctype string
	etag  string // strong validator: a hash of body
	cache string // Cache-Control value
	page  bool   // an HTML page: gets the CSP and framing headers
}

// site maps request paths to embedded files.
type site struct {
	routes map[string]*file
}

var (
	publicSite = mustSite(map[string]string{
		"/":              "public/index.html",
		"/roomcast.js":   "roomcast.js",
		"/roomcast.d.ts": "roomcast.d.ts",
	}, "public", "shared")
	adminSite = mustSite(map[string]string{
		"/": "admin/index.html",
	}, "admin", "shared")
)

// Public serves the public listener's pages: "/" (the demo page),
// "/roomcast.js", "/roomcast.d.ts" and the demo page's assets under
// "/assets/". Other paths get a 404 with a JSON error body; methods other
// than GET and HEAD get a 405.
func Public() http.Handler { return publicSite }

// Admin serves the operator page at "/" and its assets under "/assets/". It
// belongs on the admin listener, beside /admin/stats and /admin/drain, which
// the page calls.
func Admin() http.Handler { return adminSite }

// mustSite builds a site from fixed routes plus every file of the asset
// directories under "/assets/" (index.html excepted). The first directory
// wins when two hold the same name. It panics on a missing file or an
// unknown extension: both are mistakes in this package, caught by any test.
func mustSite(routes map[string]string, assetDirs ...string) *site {
	s := &site{routes: make(map[string]*file)}
	for route, name := range routes {
		s.routes[route] = mustFile(name)
	}
	for _, dir := range assetDirs {
		entries, err := fs.ReadDir(static, "static/"+dir)
		if err != nil {
			panic(fmt.Sprintf("web: %v", err))
		}
		for _, e := range entries {
			route := "/assets/" + e.Name()
			if e.IsDir() || e.Name() == "index.html" || s.routes[route] != nil {
				continue
			}
			s.routes[route] = mustFile(dir + "/" + e.Name())
		}
	}
	return s
}

func mustFile(name string) *file {
	body, err := static.ReadFile("static/" + name)
	if err != nil {
		panic(fmt.Sprintf("web: %v", err))
	}
	ext := path.Ext(name)
	ctype, ok := contentTypes[ext]
	if !ok {
		panic(fmt.Sprintf("web: no content type for %q", name))
	}
	sum := sha256.Sum256(body)
	f := &file{
		name:  name,
		body:  body,
		ctype: ctype,
		etag:  `"` + hex.EncodeToString(sum[:12]) + `"`,
		cache: cacheAsset,
		page:  ext == ".html",
	}
	if f.page {
		f.cache = cachePage
	}
	return f
}

func (s *site) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f := s.routes[r.URL.Path]
	if f == nil {
		writeError(w, http.StatusNotFound, "not_found",
			fmt.Sprintf("no page at %s", r.URL.Path))
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeError(w, http.StatusMethodNotAllowed, "method_not_allowed",
			fmt.Sprintf("%s is not allowed on %s", r.Method, r.URL.Path))
		return
	}
	h := w.Header()
	h.Set("Content-Type", f.ctype)
	h.Set("Cache-Control", f.cache)
	h.Set("ETag", f.etag)
	h.Set("X-Content-Type-Options", "nosniff")
	if f.page {
		h.Set("Content-Security-Policy", pageCSP)
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
	}
	// ServeContent answers conditional requests (If-None-Match → 304),
	// ranges and HEAD. The zero modtime leaves Last-Modified out: the ETag is
	// the validator.
	http.ServeContent(w, r, f.name, time.Time{}, bytes.NewReader(f.body))
}

// writeError writes the gateway's error shape, {"error","message"}.
func writeError(w http.ResponseWriter, status int, code, msg string) {
	body, _ := json.Marshal(struct {
		Error   string `json:"error"`
		Message string `json:"message"`
	}{code, msg})
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	w.Write(append(body, '\n'))
}
