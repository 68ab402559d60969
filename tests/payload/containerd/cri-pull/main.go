// cri-pull asks containerd's CRI image service to pull one image, as kubelet does (PullImage over the runtime
// endpoint kubelet.conf names), and prints the image containerd reports, or its error. The Wine rig's way to pull
// through containerd's CRI plugin: kubelet.exe's own gRPC dialer does not get past Wine's named pipes, containerd's
// does (the one ctr uses). Test infrastructure only.
//
//	cri-pull.exe <endpoint, e.g. npipe://./pipe/containerd-containerd> <image>
package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/containerd/containerd/pkg/dialer"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtime "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: cri-pull <endpoint> <image>")
		os.Exit(2)
	}
	address := os.Args[1]
	if pipe, ok := strings.CutPrefix(address, "npipe://"); ok {
		address = strings.ReplaceAll(pipe, "/", `\`)
		if !strings.HasPrefix(address, `\\`) {
			address = `\\` + strings.TrimLeft(address, `\`)
		}
	}
	// Each step bounded on its own: a containerd still starting is waited for (the dialer retries) up to 20 s, and
	// the pull gets its full minute.
	dialling, cancelDial := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancelDial()
	conn, err := grpc.DialContext(dialling, dialer.DialAddress(address),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(dialer.ContextDialer),
		grpc.WithBlock())
	if err != nil {
		fmt.Fprintf(os.Stderr, "cri-pull: dialling %s: %v\n", address, err)
		os.Exit(1)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	reply, err := runtime.NewImageServiceClient(conn).PullImage(ctx,
		&runtime.PullImageRequest{Image: &runtime.ImageSpec{Image: os.Args[2]}})
	if err != nil {
		fmt.Fprintf(os.Stderr, "cri-pull: %v\n", err)
		os.Exit(1)
	}
	fmt.Println(reply.ImageRef)
}
