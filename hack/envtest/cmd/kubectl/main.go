// Command kubectl is the Kubernetes CLI, built from the k8s.io/kubectl staging
// module pinned by this module's replace block (see ../../README.md).
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	"k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"
)

func main() {
	// Apply -v before the command tree is built so that plugin discovery and
	// kuberc loading honour it as well.
	_, _ = logs.GlogSetter(cmd.GetLogVerbosity(os.Args))
	if err := cli.RunNoErrOutput(cmd.NewDefaultKubectlCommand()); err != nil {
		util.CheckErr(err)
	}
}
