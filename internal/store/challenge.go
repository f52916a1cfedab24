package store

import (
	"context"
	"fmt"

	"github.com/uptrace/bun"

	"seckill/internal/seckill"
)

// writeQuiz inserts a campaign's quiz questions (none: nothing).
func writeQuiz(ctx context.Context, db bun.IDB, voucherID int64, qs []seckill.QuizQuestion) error {
	if len(qs) == 0 {
		return nil
	}
	rows := toDBQuiz(voucherID, qs)
	if _, err := db.NewInsert().Model(&rows).Exec(ctx); err != nil {
		return voucherWriteError("insert quiz", err)
	}
	return nil
}

// CampaignQuiz returns a campaign's quiz questions in order, with their
// accepted answers (normalized); none for a campaign without a quiz.
func (s *Store) CampaignQuiz(ctx context.Context, voucherID int64) ([]seckill.QuizQuestion, error) {
	var rows []quizRow
	err := s.db.NewSelect().Model(&rows).Where("q.voucher_id = ?", voucherID).OrderExpr("q.position").Scan(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: select quiz of %d: %w", voucherID, err)
	}
	out := make([]seckill.QuizQuestion, len(rows))
	for i, r := range rows {
		out[i] = seckill.QuizQuestion{Question: r.Question, Answers: r.Answers}
	}
	return out, nil
}
