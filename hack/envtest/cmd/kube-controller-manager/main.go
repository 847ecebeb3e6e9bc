// Command kube-controller-manager wraps k8s.io/kubernetes/cmd/kube-controller-manager/app for the kvpilot
// integration-test control plane (see ../../README.md).
package main

import (
	"os"
	_ "time/tzdata" // timezone data for binaries run without a system zoneinfo

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // --logging-format=json
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // build-info metric
	"k8s.io/kubernetes/cmd/kube-controller-manager/app"
)

func main() {
	os.Exit(cli.Run(app.NewControllerManagerCommand()))
}
