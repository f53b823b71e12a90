package kafkaio

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/switchboard-mcp/switchboard/router/lag"
)

// consumerStatsJSON is the part of librdkafka's statistics (STATISTICS.md)
// the router's lag comes from.
type consumerStatsJSON struct {
	Topics map[string]struct {
		Partitions map[string]struct {
			Partition  int32  `json:"partition"`
			FetchState string `json:"fetch_state"`
			HiOffset   int64  `json:"hi_offset"`
			LsOffset   int64  `json:"ls_offset"`
			LoOffset   int64  `json:"lo_offset"`
			AppOffset  int64  `json:"app_offset"`
			Committed  int64  `json:"committed_offset"`
		} `json:"partitions"`
	} `json:"topics"`
	Cgrp *struct {
		RebalanceCnt int64 `json:"rebalance_cnt"`
	} `json:"cgrp"`
}

// parseConsumerStats reads a read_committed consumer's lag from its
// statistics: per partition it fetches (fetch_state other than none and
// stopped), the last stable offset (the high watermark if the broker gave
// none) minus the position handed to the application (app_offset, which
// librdkafka moves past transaction markers; before the first record the
// committed offset, else the low watermark, where auto.offset.reset=earliest
// starts). librdkafka's own consumer_lag
// counts from the committed offset, which exactly_once never updates in the
// consumer (the transaction commits offsets), so it is not used.
func parseConsumerStats(js string) (lag.ConsumerStats, error) {
	var raw consumerStatsJSON
	if err := json.Unmarshal([]byte(js), &raw); err != nil {
		return lag.ConsumerStats{}, fmt.Errorf("kafkaio: reading client statistics: %w", err)
	}
	var st lag.ConsumerStats
	if raw.Cgrp != nil {
		st.Rebalances = raw.Cgrp.RebalanceCnt
	}
	for topic, t := range raw.Topics {
		for _, p := range t.Partitions {
			if p.Partition < 0 || p.FetchState == "none" || p.FetchState == "stopped" {
				continue // the unassigned partition (-1), or one this client does not fetch
			}
			end := p.LsOffset
			if end < 0 {
				end = p.HiOffset
			}
			pos := p.AppOffset
			if pos < 0 {
				pos = p.Committed
			}
			if pos < 0 {
				pos = p.LoOffset // nothing read nor committed: it starts at the beginning
			}
			if end < 0 || pos < 0 {
				continue
			}
			st.Partitions = append(st.Partitions, lag.ConsumerPartition{Topic: topic, Partition: p.Partition, Records: max(0, end-pos)})
		}
	}
	slices.SortFunc(st.Partitions, func(a, b lag.ConsumerPartition) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return int(a.Partition - b.Partition)
	})
	return st, nil
}
