package kafkaio

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/switchboard-mcp/switchboard/router/config"
)

// resourceTransactionalID is librdkafka's RD_KAFKA_RESOURCE_TRANSACTIONAL_ID,
// which confluent-kafka-go v2.11 has no constant for.
const resourceTransactionalID kafka.ResourceType = 5

// ApplyACLs creates the allow rules on the cluster, for any host. Creating
// a rule that exists already is not an error; nothing is removed. The
// settings' principal needs Alter on the cluster (a super user does).
//
// It returns once a broker lists every rule (DescribeAcls), or fails after
// aclsVisibleWithin: a broker applies new rules once it has read them from
// the metadata log, and a client started before that is denied. On a busy
// machine that took seconds.
func ApplyACLs(ctx context.Context, s Settings, acls []config.ACL) error {
	if len(acls) == 0 {
		return nil
	}
	bindings := make(kafka.ACLBindings, len(acls))
	for i, a := range acls {
		b, err := bindingOf(a)
		if err != nil {
			return err
		}
		bindings[i] = b
	}
	a, err := newAdmin(s)
	if err != nil {
		return err
	}
	defer a.Close()
	ctx, stop := a.w.bound(ctx)
	defer stop()
	res, err := a.CreateACLs(ctx, bindings, kafka.SetAdminRequestTimeout(30*time.Second))
	if err != nil {
		return refusedOr(a.refusalOr(err), "kafkaio: creating ACLs: %w")
	}
	for i, r := range res {
		if r.Error.Code() != kafka.ErrNoError {
			return refusedOr(s.refusal(r.Error, "Alter", "the cluster"), "kafkaio: creating the ACL %s: %w", describeACL(acls[i]))
		}
	}
	return a.awaitACLs(ctx, bindings)
}

// aclsVisibleWithin bounds ApplyACLs' wait for the rules to be listed.
const aclsVisibleWithin = time.Minute

// awaitACLs waits until DescribeAcls lists every binding.
func (a *admin) awaitACLs(ctx context.Context, want kafka.ACLBindings) error {
	all := kafka.ACLBindingFilter{
		Type: kafka.ResourceAny, ResourcePatternType: kafka.ResourcePatternTypeAny,
		Operation: kafka.ACLOperationAny, PermissionType: kafka.ACLPermissionTypeAny,
	}
	deadline := retryClock.Now().Add(aclsVisibleWithin)
	missing := len(want)
	for {
		res, err := a.DescribeACLs(ctx, all, kafka.SetAdminRequestTimeout(10*time.Second))
		if err == nil && res.Error.Code() == kafka.ErrNoError {
			have := make(map[kafka.ACLBinding]bool, len(res.ACLBindings))
			for _, b := range res.ACLBindings {
				have[b] = true
			}
			missing = 0
			for _, b := range want {
				if !have[b] {
					missing++
				}
			}
			if missing == 0 {
				return nil
			}
		}
		if !retryClock.Now().Before(deadline) {
			return fmt.Errorf("kafkaio: %d of %d ACLs created are still not listed by the brokers after %s", missing, len(want), aclsVisibleWithin)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kafkaio: waiting for the ACLs to be listed: %w", ctx.Err())
		case <-retryClock.After(100 * time.Millisecond):
		}
	}
}

func describeACL(a config.ACL) string {
	return fmt.Sprintf("%s %s on %s %s %q", a.Principal, a.Operation, strings.ToLower(a.PatternType), a.ResourceType, a.Name)
}

func bindingOf(a config.ACL) (kafka.ACLBinding, error) {
	b := kafka.ACLBinding{Name: a.Name, Principal: a.Principal, Host: "*", PermissionType: kafka.ACLPermissionTypeAllow}
	switch a.ResourceType {
	case config.ACLTopic:
		b.Type = kafka.ResourceTopic
	case config.ACLGroup:
		b.Type = kafka.ResourceGroup
	case config.ACLTransactionalID:
		b.Type = resourceTransactionalID
	default:
		return b, fmt.Errorf("kafkaio: ACL %s: unknown resource type %q", describeACL(a), a.ResourceType)
	}
	switch a.PatternType {
	case config.ACLLiteral:
		b.ResourcePatternType = kafka.ResourcePatternTypeLiteral
	case config.ACLPrefixed:
		b.ResourcePatternType = kafka.ResourcePatternTypePrefixed
	default:
		return b, fmt.Errorf("kafkaio: ACL %s: unknown pattern type %q", describeACL(a), a.PatternType)
	}
	op, ok := aclOperations[a.Operation]
	if !ok {
		return b, fmt.Errorf("kafkaio: ACL %s: unknown operation %q", describeACL(a), a.Operation)
	}
	b.Operation = op
	return b, nil
}

var aclOperations = map[string]kafka.ACLOperation{
	config.ACLRead:            kafka.ACLOperationRead,
	config.ACLWrite:           kafka.ACLOperationWrite,
	config.ACLDescribe:        kafka.ACLOperationDescribe,
	config.ACLDescribeConfigs: kafka.ACLOperationDescribeConfigs,
	config.ACLCreate:          kafka.ACLOperationCreate,
}
