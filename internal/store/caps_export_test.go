package store

// SetCapCounted installs a hook that runs in every capped creation between
// its count and its insert, with its lock held; the returned func removes it.
func SetCapCounted(fn func(key string)) (restore func()) {
	capCounted = fn
	return func() { capCounted = nil }
}
