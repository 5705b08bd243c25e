package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
)

// Bounds of a credential.
const (
	maxSecret     = 16 << 10 // one token, bytes
	maxSecretFile = 64 << 10 // a credential file, bytes
)

var (
	errSecretEmpty = errors.New("holds no token")
	errSecretMany  = errors.New("holds more than one token (one non-blank line expected)")
	errSecretLong  = fmt.Errorf("token longer than %d bytes", maxSecret)
)

// checkSecret accepts a token that can be sent as Authorization: Bearer <token>:
// 1 to maxSecret bytes of visible ASCII. Its errors never quote the token.
func checkSecret(s string) error {
	if s == "" {
		return errSecretEmpty
	}
	if len(s) > maxSecret {
		return errSecretLong
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f {
			return fmt.Errorf("token has a space, control or non-ASCII byte at offset %d", i)
		}
	}
	return nil
}

// parseSecret reads the content of a credential file: one token on one line, with
// blank lines, surrounding spaces, a UTF-8 byte order mark and CRLF line ends
// allowed around it.
func parseSecret(b []byte) (string, error) {
	b = bytes.TrimPrefix(b, []byte("\xef\xbb\xbf"))
	var tok []byte
	for line := range bytes.Lines(b) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		if tok != nil {
			return "", errSecretMany
		}
		tok = line
	}
	s := string(tok)
	if err := checkSecret(s); err != nil {
		return "", err
	}
	return s, nil
}

// readSecretFile reads a credential file (see parseSecret), at most maxSecretFile
// bytes.
func readSecretFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSecretFile+1))
	if err != nil {
		return "", err
	}
	if len(b) > maxSecretFile {
		return "", fmt.Errorf("larger than %d bytes", maxSecretFile)
	}
	return parseSecret(b)
}

// resolveSecret picks a credential: the flag's value, else the file's, else the
// environment variable's; "" when none is set. Both flag and file is a usage error.
func resolveSecret(flagName, value, file, envName string, getenv func(string) string) (string, error) {
	switch {
	case value != "" && file != "":
		return "", usagef("give --%s or --%s-file, not both", flagName, flagName)
	case value != "":
		if err := checkSecret(value); err != nil {
			return "", usagef("--%s: %v", flagName, err)
		}
		return value, nil
	case file != "":
		s, err := readSecretFile(file)
		if err != nil {
			return "", usagef("--%s-file %s: %v", flagName, file, err)
		}
		return s, nil
	}
	v := getenv(envName)
	if v == "" {
		return "", nil
	}
	if err := checkSecret(v); err != nil {
		return "", usagef("%s: %v", envName, err)
	}
	return v, nil
}
