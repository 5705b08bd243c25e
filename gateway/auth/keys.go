package auth

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
)

const (
	// maxKeyFile bounds a key file; a JWKS of a few dozen keys is a few tens of KiB.
	maxKeyFile = 1 << 20
	// minRSABits is the smallest RSA modulus accepted.
	minRSABits = 2048
	// minHMACSecret is the shortest HS256 secret accepted (RFC 7518 §3.2).
	minHMACSecret = 32
	// forcedReloadEvery bounds how often a token naming an unknown kid makes the key
	// files be read again.
	forcedReloadEvery = time.Second
)

var (
	rsaAlgs   = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512"}
	es256Algs = []string{"ES256"}
	es384Algs = []string{"ES384"}
	es512Algs = []string{"ES512"}
	edAlgs    = []string{"EdDSA"}
	hmacAlgs  = []string{"HS256"}
)

// verifyKey is one key a token may be verified with.
type verifyKey struct {
	kid  string   // "" for PEM keys, the HMAC secret and JWKs without a kid
	key  any      // *rsa.PublicKey, *ecdsa.PublicKey, ed25519.PublicKey or []byte (HS256)
	algs []string // the algorithms this key verifies
}

// keySet is an immutable snapshot of every configured key.
type keySet struct {
	all     []*verifyKey
	byKid   map[string][]*verifyKey
	kidless []*verifyKey
}

func newKeySet(files []*keyFile) *keySet {
	s := &keySet{byKid: map[string][]*verifyKey{}}
	for _, f := range files {
		for _, k := range f.keys {
			s.all = append(s.all, k)
			if k.kid == "" {
				s.kidless = append(s.kidless, k)
			} else {
				s.byKid[k.kid] = append(s.byKid[k.kid], k)
			}
		}
	}
	return s
}

// candidates returns the keys a token with kid and alg may be verified with: a key
// with a kid only for that kid, a key without one for any token; a token without a kid
// tries every key. Only keys that verify alg are returned.
func (s *keySet) candidates(kid, alg string) []*verifyKey {
	pool := s.all
	if kid != "" {
		pool = append(slices.Clip(s.byKid[kid]), s.kidless...)
	}
	var out []*verifyKey
	for _, k := range pool {
		if slices.Contains(k.algs, alg) {
			out = append(out, k)
		}
	}
	return out
}

// supports reports whether any key verifies alg.
func (s *keySet) supports(alg string) bool {
	for _, k := range s.all {
		if slices.Contains(k.algs, alg) {
			return true
		}
	}
	return false
}

// keyFile is one watched file and the keys last read from it successfully.
type keyFile struct {
	path    string
	hmac    bool
	sum     [sha256.Size]byte // of the content last read, good or bad
	lastErr string            // the last warning logged for it, so that it is logged once
	keys    []*verifyKey      // the last good keys
}

// keyring holds the keys of every file and re-reads the files when they change.
type keyring struct {
	log   *slog.Logger
	set   atomic.Pointer[keySet]
	files []*keyFile // guarded by mu

	mu         sync.Mutex   // guards files; held while files are read (small, bounded)
	lastForced atomic.Int64 // Unix nanoseconds of the last reload a token forced
}

// newKeyring reads every file now; any error names the file, never its content.
func newKeyring(keyFiles []string, hmacFile string, log *slog.Logger) (*keyring, error) {
	kr := &keyring{log: log}
	for _, path := range keyFiles {
		kr.files = append(kr.files, &keyFile{path: path})
	}
	if hmacFile != "" {
		kr.files = append(kr.files, &keyFile{path: hmacFile, hmac: true})
	}
	for _, f := range kr.files {
		data, err := readKeyFile(f.path)
		if err == nil {
			f.keys, err = parseKeyFile(data, f.hmac)
		}
		if err != nil {
			return nil, fmt.Errorf("auth: key file %s: %w", f.path, err)
		}
		f.sum = sha256.Sum256(data)
	}
	kr.set.Store(newKeySet(kr.files))
	return kr, nil
}

// configured reports whether any JWT key file is configured.
func (kr *keyring) configured() bool { return len(kr.files) > 0 }

func (kr *keyring) current() *keySet { return kr.set.Load() }

// watch re-reads the files every interval until ctx ends.
func (kr *keyring) watch(ctx context.Context, every time.Duration) {
	if len(kr.files) == 0 {
		return
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			kr.reload()
		}
	}
}

// forceReload re-reads the files unless that was forced less than a second ago.
func (kr *keyring) forceReload() {
	now := time.Now().UnixNano()
	last := kr.lastForced.Load()
	if now-last < int64(forcedReloadEvery) || !kr.lastForced.CompareAndSwap(last, now) {
		return
	}
	kr.reload()
}

// reload re-reads every file. A file that cannot be read or parsed keeps its last
// good keys and logs one warning (its path and the reason, never its content).
func (kr *keyring) reload() {
	kr.mu.Lock()
	defer kr.mu.Unlock()
	changed := false
	for _, f := range kr.files {
		data, err := readKeyFile(f.path)
		if err != nil {
			kr.warn(f, err)
			continue
		}
		sum := sha256.Sum256(data)
		if sum == f.sum {
			continue
		}
		f.sum = sum
		keys, err := parseKeyFile(data, f.hmac)
		if err != nil {
			kr.warn(f, err)
			continue
		}
		f.keys, f.lastErr, changed = keys, "", true
		kr.log.Info("auth: key file reloaded", "file", f.path, "keys", len(keys))
	}
	if changed {
		kr.set.Store(newKeySet(kr.files))
	}
}

func (kr *keyring) warn(f *keyFile, err error) {
	if err.Error() == f.lastErr {
		return
	}
	f.lastErr = err.Error()
	kr.log.Warn("auth: key file unusable, keeping its last good keys", "file", f.path, "err", err)
}

// readKeyFile reads at most maxKeyFile bytes of path.
func readKeyFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, errors.Unwrap(err) // the *PathError's path is named by the caller
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxKeyFile+1))
	if err != nil {
		return nil, errors.Unwrap(err)
	}
	if len(data) > maxKeyFile {
		return nil, fmt.Errorf("larger than %d bytes", maxKeyFile)
	}
	return data, nil
}

// parseKeyFile parses an HS256 secret, a JWKS document or PEM public keys. Its errors
// never quote the content.
func parseKeyFile(data []byte, hmac bool) ([]*verifyKey, error) {
	trimmed := bytes.TrimSpace(data)
	switch {
	case hmac:
		if len(trimmed) < minHMACSecret {
			return nil, fmt.Errorf("HS256 secret shorter than %d bytes", minHMACSecret)
		}
		return []*verifyKey{{key: bytes.Clone(trimmed), algs: hmacAlgs}}, nil
	case len(trimmed) > 0 && trimmed[0] == '{':
		return parseJWKS(trimmed)
	default:
		return parsePEM(data)
	}
}

func parsePEM(data []byte) ([]*verifyKey, error) {
	var keys []*verifyKey
	for n := 1; ; n++ {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		var pub any
		var err error
		switch block.Type {
		case "PUBLIC KEY":
			pub, err = x509.ParsePKIXPublicKey(block.Bytes)
		case "RSA PUBLIC KEY":
			pub, err = x509.ParsePKCS1PublicKey(block.Bytes)
		case "CERTIFICATE":
			var cert *x509.Certificate
			if cert, err = x509.ParseCertificate(block.Bytes); err == nil {
				pub = cert.PublicKey
			}
		default:
			return nil, fmt.Errorf("PEM block %d: type %.40q is not a public key or certificate", n, block.Type)
		}
		if err != nil {
			return nil, fmt.Errorf("PEM block %d: not a valid %s", n, block.Type)
		}
		k, err := publicKey(pub)
		if err != nil {
			return nil, fmt.Errorf("PEM block %d: %w", n, err)
		}
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return nil, errors.New("neither a JWKS document nor a PEM public key")
	}
	return keys, nil
}

func parseJWKS(data []byte) ([]*verifyKey, error) {
	set, err := jwk.Parse(data)
	if err != nil {
		return nil, errors.New("not a valid JWK set or JWK") // the parser's message may quote the content
	}
	var keys []*verifyKey
	for i := range set.Len() {
		key, _ := set.Key(i)
		kid, _ := key.KeyID()
		if use, ok := key.KeyUsage(); ok && use != "sig" {
			continue // an encryption key published beside the signing keys
		}
		if key.KeyType() == jwa.OctetSeq() {
			return nil, fmt.Errorf("key %d (kid %.64q): a symmetric key; an HS256 secret belongs in the HMAC secret file", i+1, kid)
		}
		pub, err := jwk.PublicRawKeyOf(key)
		if err != nil {
			return nil, fmt.Errorf("key %d (kid %.64q): no public key", i+1, kid)
		}
		k, err := publicKey(pub)
		if err != nil {
			return nil, fmt.Errorf("key %d (kid %.64q): %w", i+1, kid, err)
		}
		k.kid = kid
		if alg, ok := key.Algorithm(); ok {
			if !slices.Contains(k.algs, alg.String()) {
				return nil, fmt.Errorf("key %d (kid %.64q): alg %.16q does not fit its key type", i+1, kid, alg.String())
			}
			k.algs = []string{alg.String()}
		}
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return nil, errors.New("no signing key in the JWK set")
	}
	return keys, nil
}

// publicKey checks pub and names the algorithms it verifies.
func publicKey(pub any) (*verifyKey, error) {
	switch pub := pub.(type) {
	case *rsa.PublicKey:
		if pub.N.BitLen() < minRSABits {
			return nil, fmt.Errorf("RSA key of %d bits, at least %d needed", pub.N.BitLen(), minRSABits)
		}
		return &verifyKey{key: pub, algs: rsaAlgs}, nil
	case *ecdsa.PublicKey:
		switch pub.Curve {
		case elliptic.P256():
			return &verifyKey{key: pub, algs: es256Algs}, nil
		case elliptic.P384():
			return &verifyKey{key: pub, algs: es384Algs}, nil
		case elliptic.P521():
			return &verifyKey{key: pub, algs: es512Algs}, nil
		}
		return nil, errors.New("ECDSA key on a curve other than P-256, P-384 or P-521")
	case ed25519.PublicKey:
		return &verifyKey{key: pub, algs: edAlgs}, nil
	}
	return nil, fmt.Errorf("unsupported key type %T", pub)
}
