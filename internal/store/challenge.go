package store

import (
	"context"
	"fmt"
	"slices"

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

// replaceQuiz makes qs a campaign's questions, unless they are the ones
// it has (was, as readQuiz read them in the same transaction): a change
// that leaves the quiz alone writes no quiz row.
func replaceQuiz(ctx context.Context, db bun.IDB, voucherID int64, was, qs []seckill.QuizQuestion) error {
	if slices.EqualFunc(toDBQuiz(voucherID, was), toDBQuiz(voucherID, qs), sameQuizRow) {
		return nil
	}
	if _, err := db.NewDelete().Model((*quizRow)(nil)).Where("voucher_id = ?", voucherID).Exec(ctx); err != nil {
		return fmt.Errorf("store: replace quiz of %d: %w", voucherID, err)
	}
	return writeQuiz(ctx, db, voucherID, qs)
}

func sameQuizRow(a, b quizRow) bool {
	return a.Question == b.Question && slices.Equal(a.Answers, b.Answers) && slices.Equal(a.Choices, b.Choices)
}

// CampaignQuiz returns a campaign's quiz questions in order, with their
// accepted answers (normalized) and their choices (nil for a free answer);
// none for a campaign without a quiz.
func (s *Store) CampaignQuiz(ctx context.Context, voucherID int64) ([]seckill.QuizQuestion, error) {
	return readQuiz(ctx, s.db, voucherID)
}

// readQuiz reads a campaign's questions; never nil.
func readQuiz(ctx context.Context, db bun.IDB, voucherID int64) ([]seckill.QuizQuestion, error) {
	var rows []quizRow
	err := db.NewSelect().Model(&rows).Where("q.voucher_id = ?", voucherID).OrderExpr("q.position").Scan(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: select quiz of %d: %w", voucherID, err)
	}
	out := make([]seckill.QuizQuestion, len(rows))
	for i, r := range rows {
		out[i] = seckill.QuizQuestion{Question: r.Question, Answers: r.Answers}
		if len(r.Choices) > 0 {
			out[i].Choices = r.Choices
		}
	}
	return out, nil
}
