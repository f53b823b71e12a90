package router

// SetMaxTxBytes sets the byte bound of an exactly_once transaction, before a
// router starts, and returns what restores it.
func SetMaxTxBytes(n int64) (restore func()) {
	old := maxTxBytes
	maxTxBytes = n
	return func() { maxTxBytes = old }
}
