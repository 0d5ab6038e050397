package service

// SetBeforeCache installs a hook that runs between a cache load's read and
// its store (tests stage races with invalidations through it).
func (s *Service) SetBeforeCache(fn func()) { s.beforeCache = fn }

// DummyHash is the hash verified for unknown emails.
const DummyHash = dummyHash
