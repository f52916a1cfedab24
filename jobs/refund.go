package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hibiken/asynq"

	"seckill/internal/seckill"
)

// TypeRefundSend sends one payment's refund to the payment provider.
const TypeRefundSend = "payment:refund"

// RefundMaxRetry bounds the retries of one send that cannot reach the
// provider: with RetryDelay's backoff about 40 minutes. After the last one
// the refund is REFUND_FAILED (it alerts) rather than archived.
const RefundMaxRetry = 12

// refundPayload is the payload of TypeRefundSend.
type refundPayload struct {
	PaymentID string `json:"payment_id"`
}

// RefundTaskID is the Asynq task id of a refund's send: one per payment,
// key generation, operator's round and sends made before it, so the
// follow-up of a send, the sweep and a retry of a lost task make one task.
func RefundTaskID(s seckill.RefundSend) string {
	return fmt.Sprintf("refund:%s:%d.%d:%d", s.PaymentID, s.Generation, s.Round, s.Sends)
}

// NewRefundTask returns the task that sends s's refund after delay.
func NewRefundTask(s seckill.RefundSend, delay time.Duration) (*asynq.Task, error) {
	if !seckill.ValidPaymentID(s.PaymentID) {
		return nil, fmt.Errorf("jobs: refund: bad payment id %q", s.PaymentID)
	}
	payload, err := json.Marshal(refundPayload{PaymentID: s.PaymentID})
	if err != nil {
		return nil, fmt.Errorf("jobs: encode refund: %w", err)
	}
	return asynq.NewTask(TypeRefundSend, payload,
		asynq.TaskID(RefundTaskID(s)),
		asynq.Queue(QueueOrders),
		asynq.ProcessIn(delay),
		asynq.MaxRetry(RefundMaxRetry),
		asynq.Timeout(30*time.Second),
	), nil
}

// RefundScheduler implements seckill.RefundQueue with an Asynq client.
type RefundScheduler struct {
	client *asynq.Client
}

var _ seckill.RefundQueue = (*RefundScheduler)(nil)

// NewRefundScheduler returns a scheduler enqueuing through client.
func NewRefundScheduler(client *asynq.Client) *RefundScheduler {
	return &RefundScheduler{client: client}
}

// ScheduleRefund enqueues s's send after delay; a task that exists already
// is not an error.
func (r *RefundScheduler) ScheduleRefund(ctx context.Context, s seckill.RefundSend, delay time.Duration) error {
	task, err := NewRefundTask(s, delay)
	if err != nil {
		return err
	}
	if _, err := r.client.EnqueueContext(ctx, task); err != nil && !errors.Is(err, asynq.ErrTaskIDConflict) {
		return fmt.Errorf("jobs: schedule refund of %s: %w", s.PaymentID, err)
	}
	return nil
}

// RefundSender is what RefundHandler needs: seckill.Refunds.Send.
type RefundSender interface {
	Send(ctx context.Context, paymentID string, final bool) error
}

// RefundHandler runs TypeRefundSend.
type RefundHandler struct {
	sender RefundSender
}

// NewRefundHandler returns a handler that sends through sender.
func NewRefundHandler(sender RefundSender) *RefundHandler {
	return &RefundHandler{sender: sender}
}

// ProcessTask implements asynq.Handler. Sending is idempotent: the
// provider refunds once per key, and a refund confirmed or failed since is
// not sent again. The last retry fails the refund instead of erring.
func (h *RefundHandler) ProcessTask(ctx context.Context, t *asynq.Task) error {
	var p refundPayload
	if err := json.Unmarshal(t.Payload(), &p); err != nil || !seckill.ValidPaymentID(p.PaymentID) {
		return fmt.Errorf("decode refund %q: %w", t.Payload(), asynq.SkipRetry)
	}
	retried, _ := asynq.GetRetryCount(ctx)
	maxRetry, ok := asynq.GetMaxRetry(ctx)
	return h.sender.Send(ctx, p.PaymentID, ok && retried >= maxRetry)
}
