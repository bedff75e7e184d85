package component

import "time"

// The defaults of the shared flags: the flags' Default and the process's
// default configuration (platform.DefaultConfig) are both made from these.
const (
	DefaultWaitTimeout    = 30 * time.Second
	DefaultViewStaleness  = 30 * time.Second
	DefaultSessionTimeout = 10 * time.Second
	DefaultGRPC           = "127.0.0.1:9090"
	DefaultDC             = "dc1"
)

// The flags that components of several packages read: each is declared
// once here, and in the spec of every component that reads it.
var (
	// Standby: a table group keeps warm copies of the partitions other
	// members own (table.Config.Standby).
	Standby = Flag{Name: "standby", Usage: "keep warm copies of the table partitions other members of this process's groups own " +
		"(standby replicas: taking one over reads the changelog's tail, not the whole partition; costs the disk of every partition)"}
	// WaitTimeout bounds a wait for a processor's answer.
	WaitTimeout = Flag{Name: "wait-timeout", Default: DefaultWaitTimeout.String(),
		Usage: "longest wait for a verdict with ?wait=true, or for a group's answer to an offer API write"}
	// ViewStaleness bounds how far behind its topic a view may answer.
	ViewStaleness = Flag{Name: "view-staleness", Default: DefaultViewStaleness.String(),
		Usage: "how long a view may be behind its topic: the API answers 503 from a view further behind (or still catching up after a start), " +
			"/readyz fails, and a view whose partition stands still that long behind its topic is restarted"}
	// ExportFraming is the framing of the export topics.
	ExportFraming = Flag{Name: "export-framing", Default: "soe",
		Usage: "framing of the export topics (documents.results, offers.events, saas.*, yt.*): soe or confluent"}
	// ZooKeeper is the ensemble of the numerator's coordinator and the
	// cache's shard owners.
	ZooKeeper = Flag{Name: "zookeeper",
		Usage: "ZooKeeper ensemble host:port,... of the numerator's coordinator, the cache's shard owners and the servers --reads cache asks (empty: in process, one master)"}
	// SessionTimeout is the ZooKeeper session's.
	SessionTimeout = Flag{Name: "session-timeout", Default: DefaultSessionTimeout.String(),
		Usage: "ZooKeeper session timeout of the numerator's coordinator: a killed master's lock is free this long after"}
	// GRPC is the address of a process's gRPC API.
	GRPC = Flag{Name: "grpc", Default: DefaultGRPC, Usage: "gRPC address of the offer API, with the api component (empty: none)"}
	// DC is the data centre of a cache server and of the API's reads
	// through the cache.
	DC = Flag{Name: "dc", Default: DefaultDC, Usage: "the data centre of the cache server, and of the API's reads through the cache (asked first)"}
)
