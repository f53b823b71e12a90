package kafkaio

import (
	"strconv"
	"time"
)

// DefaultTransactionTimeout is the transaction.timeout.ms the router's
// transactional producers get unless the configuration's Kafka properties
// set one (TxSink's lanes).
const DefaultTransactionTimeout = 20 * time.Second

// TransactionTimeout is the transaction timeout the router's transactional
// producers run with under s: the transaction.timeout.ms property, or
// DefaultTransactionTimeout when it is unset or not a positive number.
func TransactionTimeout(s Settings) time.Duration {
	if v, err := strconv.Atoi(s.Properties["transaction.timeout.ms"]); err == nil && v > 0 {
		return time.Duration(v) * time.Millisecond
	}
	return DefaultTransactionTimeout
}
