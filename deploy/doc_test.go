// Package deploy_test is the drift test of the deployment examples in this folder and
// of the Dockerfile: it fails when they no longer agree with the gateway binary.
//
// It owns no code of the product. It builds ./cmd/gateway, takes the flag names and
// defaults from the binary's -help, and proves that each Deployment's args and env
// are accepted by starting the binary with them (listeners moved to loopback, Redis
// pointed at nothing), reading the settings in effect from its start-up line and
// GOMEMLIMIT from its metrics. The manifests are decoded into the Kubernetes API's
// own types (k8s.io/api, quantities from k8s.io/apimachinery), the Dockerfile with
// BuildKit's parser. nginx reads the nginx examples itself: nginx -t on nginx.conf,
// and a real nginx on a loopback socket answers whether the body limits of nginx.conf
// and of the Ingresses' proxy-body-size are the gateway's, and that nginx.conf sends
// every route of a room to one gateway. A redis-server reads redis/redis.conf and
// redis/users.acl, and answers whether redis_exporter's user may run what the
// exporter sends (redis_test.go).
//
// TestDeployDriftChecksBite breaks each rule on purpose and requires its check to
// fail: a check that cannot fail guards nothing.
package deploy_test
