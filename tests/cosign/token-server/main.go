// A token server for the distribution registry's token authentication (the Bearer flow of Docker Hub, GHCR, Quay,
// Harbor), for the tests: Debian's docker-registry is configured with `auth: token` naming this server as its
// realm, and a client that the registry answers 401 with a Bearer challenge comes here with its Basic credentials
// for a token. Test infrastructure only.
//
// It grants what it is asked (the `scope` parameters, each one or more scopes separated by spaces) to the one user
// it knows, for the one service it serves, in a JWT signed ES256 with the key given and its certificate in the
// `x5c` header, which the registry checks against its `rootcertbundle`. The answer carries the token as `token`
// only (the field the distribution spec requires; `access_token` is OAuth 2's, which a client may also read). Each
// answer is logged on stderr before it is sent (`granted:` with the user and the scopes, `refused:` with why; never
// the password), so that a test reads who asked as soon as its client has the answer.
//
//	token-server -addr 127.0.0.1:PORT -cert tls.pem -key tls.key -signing-key sign.key -signing-cert sign.pem \
//	    -issuer ISSUER -service SERVICE -user NAME:PASSWORD
package main

import (
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"strings"
	"time"
)

type access struct {
	Type    string   `json:"type"`
	Name    string   `json:"name"`
	Actions []string `json:"actions"`
}

func main() {
	addr := flag.String("addr", "127.0.0.1:5001", "the address to serve on")
	cert := flag.String("cert", "", "the TLS serving certificate (PEM)")
	key := flag.String("key", "", "its private key (PEM)")
	signingKey := flag.String("signing-key", "", "the ECDSA P-256 key tokens are signed with (PKCS#8 PEM)")
	signingCert := flag.String("signing-cert", "", "its certificate (PEM), which the registry trusts")
	issuer := flag.String("issuer", "", "the tokens' issuer (the registry's auth.token.issuer)")
	service := flag.String("service", "", "the registry's service name (auth.token.service)")
	user := flag.String("user", "", "NAME:PASSWORD of the one user")
	flag.Parse()
	if *cert == "" || *key == "" || *signingKey == "" || *signingCert == "" || *issuer == "" || *service == "" || !strings.Contains(*user, ":") {
		log.Fatal("token-server: -cert, -key, -signing-key, -signing-cert, -issuer, -service and -user NAME:PASSWORD are required")
	}
	name, password, _ := strings.Cut(*user, ":")
	signer := readKey(*signingKey)
	chain := readCert(*signingCert)

	http.HandleFunc("/token", func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		if !ok || u != name || p != password {
			log.Printf("refused: user %q", u)
			w.Header().Set("WWW-Authenticate", `Basic realm="token-server"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		if r.URL.Query().Get("service") != *service {
			log.Printf("refused: service %q", r.URL.Query().Get("service"))
			http.Error(w, "unknown service", http.StatusBadRequest)
			return
		}
		var granted []access
		var scopes []string
		for _, param := range r.URL.Query()["scope"] {
			for _, scope := range strings.Fields(param) {
				parts := strings.Split(scope, ":")
				if len(parts) != 3 {
					log.Printf("refused: scope %q", scope)
					http.Error(w, "bad scope", http.StatusBadRequest)
					return
				}
				scopes = append(scopes, scope)
				granted = append(granted, access{Type: parts[0], Name: parts[1], Actions: strings.Split(parts[2], ",")})
			}
		}
		now := time.Now()
		header := map[string]any{"typ": "JWT", "alg": "ES256", "x5c": []string{base64.StdEncoding.EncodeToString(chain)}}
		claims := map[string]any{
			"iss": *issuer, "sub": u, "aud": *service, "exp": now.Add(5 * time.Minute).Unix(),
			"nbf": now.Add(-10 * time.Second).Unix(), "iat": now.Unix(), "jti": fmt.Sprint(now.UnixNano()),
			"access": granted,
		}
		token, err := sign(signer, header, claims)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		log.Printf("granted: user %q scope %q", u, strings.Join(scopes, " "))
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"token": token, "expires_in": 300, "issued_at": now.UTC().Format(time.RFC3339),
		})
	})
	log.Fatal(http.ListenAndServeTLS(*addr, *cert, *key, nil))
}

// sign makes a JWS compact serialization: ES256 is the signature's r and s, 32 bytes each.
func sign(key *ecdsa.PrivateKey, header, claims map[string]any) (string, error) {
	enc := base64.RawURLEncoding
	h, err := json.Marshal(header)
	if err != nil {
		return "", err
	}
	c, err := json.Marshal(claims)
	if err != nil {
		return "", err
	}
	input := enc.EncodeToString(h) + "." + enc.EncodeToString(c)
	digest := sha256.Sum256([]byte(input))
	r, s, err := ecdsa.Sign(rand.Reader, key, digest[:])
	if err != nil {
		return "", err
	}
	sig := make([]byte, 64)
	r.FillBytes(sig[:32])
	s.FillBytes(sig[32:])
	return input + "." + enc.EncodeToString(sig), nil
}

func readKey(path string) *ecdsa.PrivateKey {
	block := readPEM(path)
	parsed, err := x509.ParsePKCS8PrivateKey(block)
	if err != nil {
		log.Fatalf("token-server: %s: %v", path, err)
	}
	key, ok := parsed.(*ecdsa.PrivateKey)
	if !ok {
		log.Fatalf("token-server: %s: not an ECDSA key", path)
	}
	return key
}

func readCert(path string) []byte {
	der := readPEM(path)
	if _, err := x509.ParseCertificate(der); err != nil {
		log.Fatalf("token-server: %s: %v", path, err)
	}
	return der
}

func readPEM(path string) []byte {
	data, err := os.ReadFile(path)
	if err != nil {
		log.Fatalf("token-server: %v", err)
	}
	block, _ := pem.Decode(data)
	if block == nil {
		log.Fatalf("token-server: %s: no PEM block", path)
	}
	return block.Bytes
}
