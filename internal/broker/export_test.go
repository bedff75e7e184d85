package broker

// WithCompactionHook returns cfg with fn called before each compaction of
// a partition by the broker's rounds, off its loop.
func WithCompactionHook(cfg Config, fn func(topic string, partition int32)) Config {
	cfg.onCompaction = fn
	return cfg
}
