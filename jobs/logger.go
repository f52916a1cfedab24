package jobs

import (
	"fmt"
	"log/slog"
	"os"
)

// Logger adapts slog to asynq.Logger.
type Logger struct{ l *slog.Logger }

// NewLogger returns an asynq.Logger writing to l.
func NewLogger(l *slog.Logger) *Logger { return &Logger{l: l.With("component", "asynq")} }

func (a *Logger) Debug(args ...any) { a.l.Debug(fmt.Sprint(args...)) }
func (a *Logger) Info(args ...any)  { a.l.Info(fmt.Sprint(args...)) }
func (a *Logger) Warn(args ...any)  { a.l.Warn(fmt.Sprint(args...)) }
func (a *Logger) Error(args ...any) { a.l.Error(fmt.Sprint(args...)) }

// Fatal logs and exits, as asynq.Logger requires.
func (a *Logger) Fatal(args ...any) {
	a.l.Error(fmt.Sprint(args...))
	os.Exit(1)
}
