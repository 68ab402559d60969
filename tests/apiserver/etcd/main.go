// etcd, as its own release binary is built (go.etcd.io/etcd/v3's main.go): the test rig's store for kube-apiserver.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
