// Command etcd is the etcd server, built from go.etcd.io/etcd/server/v3 so
// that it shares this module's dependency graph (see ../../README.md).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
