package gateway

import (
	"regexp"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// GoCollector is the Go runtime collector a pod registers beside the gateway's own
// metrics: client_golang's defaults plus go_sched_latencies_seconds, the time
// goroutines wait to run (a loop that blocks shows there first).
func GoCollector() prometheus.Collector {
	return collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(
		collectors.GoRuntimeMetricsRule{Matcher: regexp.MustCompile(`^/sched/latencies:seconds$`)}))
}

// buildVersion names the running build: the main module's version, else the VCS
// revision it was built from (12 characters), else "devel".
func buildVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && s.Value != "" {
			return s.Value[:min(len(s.Value), 12)]
		}
	}
	return "devel"
}
