// A registry with the OCI 1.1 referrers API, for the signing tests: go-containerregistry's pkg/registry (the
// in-memory registry its own tests and cosign's use) served over TLS on the address given. Debian's
// docker-registry (distribution 2.8) has no referrers API; this one does. Test infrastructure only.
//
// One rig-only mend: pkg/registry answers a finished blob upload with 201 and no `Location` header, which the
// distribution spec requires (the blob's URL) and oci-client, the client `wmrender publish` uses, insists on. The
// wrapper below adds it; nothing else is changed.
//
//	oci-registry -addr 127.0.0.1:PORT -cert reg.pem -key reg.key
package main

import (
	"flag"
	"log"
	"net/http"
	"os"
	"strings"

	"github.com/google/go-containerregistry/pkg/registry"
)

// blobLocation adds the blob's URL as `Location` to a 201 that finishes a blob upload without one.
type blobLocation struct {
	http.ResponseWriter
	req *http.Request
}

func (w blobLocation) WriteHeader(code int) {
	digest := w.req.URL.Query().Get("digest")
	path := w.req.URL.Path
	if code == http.StatusCreated && digest != "" && w.Header().Get("Location") == "" {
		if i := strings.Index(path, "/blobs/uploads"); i > 0 {
			w.Header().Set("Location", path[:i]+"/blobs/"+digest)
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func main() {
	addr := flag.String("addr", "127.0.0.1:5000", "the address to serve on")
	cert := flag.String("cert", "", "the serving certificate (PEM)")
	key := flag.String("key", "", "its private key (PEM)")
	flag.Parse()
	if *cert == "" || *key == "" {
		log.Fatal("oci-registry: -cert and -key are required (it serves TLS only)")
	}
	logger := log.New(os.Stderr, "", log.LstdFlags)
	handler := registry.New(registry.Logger(logger), registry.WithReferrersSupport(true))
	mended := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handler.ServeHTTP(blobLocation{w, r}, r)
	})
	server := &http.Server{Addr: *addr, Handler: mended}
	log.Fatal(server.ListenAndServeTLS(*cert, *key))
}
