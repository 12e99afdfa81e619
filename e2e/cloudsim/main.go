// Command cloudsim is the cloud simulator: it serves the APIs of AWS EC2,
// GCP Compute, Azure Resource Manager, Lambda Cloud, Verda, Vultr, RunPod
// and Vast.ai, enough of each for the provider's official Go SDK (or
// hoist's client, where the provider has none) to work against it, boots
// "VMs" that are sshd processes on their own 127.77.x.y addresses, runs
// "pods" as Docker containers on the host network with such an address,
// and serves an admin API (/_sim/...) for tests. See package hoist/e2e/cloudsim/sim.
//
//	go run ./e2e/cloudsim --listen 127.0.0.1:0 --state DIR
//
// Once it serves it prints one JSON line on stdout,
// {"endpoints":{"aws":URL,...},"admin":URL,"ca_file":PATH}, and runs until
// SIGTERM or SIGINT, when it stops every VM's sshd and leaves the state in
// DIR for the next run, which boots the VMs that were running again (attached
// disks stay attached, loop devices included; pods' Docker containers keep
// running, as a provider's pods outlive its API, and the next run finds them
// by label: `docker rm -f $(docker ps -aq --filter label=hoist.cloudsim=DIR)`
// removes them, DIR absolute). It needs root: VMs listen on
// port 22. It is test support: run by tests and by people trying hoist,
// never imported; tests run it in their own process with
// testenv.StartCloudSim, which also detaches the disks and removes the pods
// when the test ends.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"hoist/e2e/cloudsim/arm"
	"hoist/e2e/cloudsim/ec2"
	"hoist/e2e/cloudsim/gce"
	"hoist/e2e/cloudsim/lambda"
	"hoist/e2e/cloudsim/runpod"
	"hoist/e2e/cloudsim/sim"
	"hoist/e2e/cloudsim/vastai"
	"hoist/e2e/cloudsim/verda"
	"hoist/e2e/cloudsim/vultr"
)

// providers are the simulated clouds, one line each.
func providers() []sim.Provider {
	return []sim.Provider{
		arm.New(),
		ec2.New(),
		gce.New(),
		lambda.New(),
		runpod.New(),
		vastai.New(),
		verda.New(),
		vultr.New(),
	}
}

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "host:port of the admin API; every provider listens on the same host")
	state := flag.String("state", "", "directory keeping the state across restarts (required)")
	bootDelay := flag.Duration("boot-delay", 0, "how long a VM stays pending before its sshd starts")
	flag.Parse()
	if *state == "" {
		fmt.Fprintln(os.Stderr, "cloudsim: --state is required")
		os.Exit(2)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	srv, err := sim.Serve(ctx, sim.ServeConfig{
		Config: sim.Config{StateDir: *state, BootDelay: *bootDelay, Logger: logger},
		Listen: *listen,
	}, providers()...)
	if err != nil {
		logger.Error("start_failed", "err", err)
		os.Exit(1)
	}
	b, _ := json.Marshal(srv.Ready)
	fmt.Println(string(b))
	<-ctx.Done()
	start := time.Now()
	if err := srv.Close(); err != nil {
		logger.Error("stop_failed", "err", err)
		os.Exit(1)
	}
	logger.Info("stopped", "took", time.Since(start))
}
