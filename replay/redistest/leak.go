package redistest

import "go.uber.org/goleak"

// LeakOptions are the goleak options for a TestMain whose tests run rueidis cluster
// clients. rueidis keeps two timers running past Client.Close, and both end by
// themselves: a topology refresh asked for after an error runs after a random delay
// of up to 1s, and a refresh that dropped a node (killed, failed over) closes that
// node's connection 5s later. A toxiproxy link (Proxy) whose toxics change while
// it carries data can leave its toxics' goroutines blocked after its proxy stops;
// they hold nothing but the link's buffers.
//
//	func TestMain(m *testing.M) {
//		goleak.VerifyTestMain(m, append(redistest.LeakOptions(),
//			goleak.Cleanup(func(code int) { redistest.Teardown(); os.Exit(code) }))...)
//	}
func LeakOptions() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*call).DelayDo.func1"),
		goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*clusterClient)._refresh.func2"),
		goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2/toxics.(*ToxicStub).Run"),
		goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2.(*ToxicLink).read"),
		goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2.(*ToxicLink).write"),
	}
}
