package broker

// WithCompactionHook returns cfg with fn called twice in each compaction
// of a partition by the broker's rounds, off its loop: before it writes
// its segments, and once they are committed but not swapped in.
func WithCompactionHook(cfg Config, fn func(topic string, partition int32, committed bool)) Config {
	cfg.onCompaction = fn
	return cfg
}
