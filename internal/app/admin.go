package app

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/term"

	"seckill/internal/config"
	"seckill/internal/seckill"
	"seckill/internal/store"
)

// CreateAdmin adds a dashboard operator with a bcrypt hash of password.
// It fails when the name is taken, or the name or password is not valid
// (the password needs at least seckill.MinAdminPasswordLen characters).
func CreateAdmin(ctx context.Context, cfg *config.Config, name, password string, out io.Writer) error {
	if err := seckill.ValidateAdminName(name); err != nil {
		return errors.New(seckill.ErrorMessage(err))
	}
	if err := seckill.ValidateAdminPassword(password); err != nil {
		return errors.New(seckill.ErrorMessage(err))
	}
	db, err := openDB(ctx, cfg)
	if err != nil {
		return err
	}
	defer db.Close()
	ops, err := seckill.NewOperators(store.New(db), bcryptCost)
	if err != nil {
		return err
	}
	a, err := ops.CreateAdmin(ctx, name, password)
	if code := seckill.ErrorCode(err); code == seckill.ECONFLICT || code == seckill.EINVALID {
		return errors.New(seckill.ErrorMessage(err))
	} else if err != nil {
		return err
	}
	_, err = fmt.Fprintf(out, "created admin %q (id %d); sign in at /admin/login\n", a.Name, a.ID)
	return err
}

// ReadPassword reads a new password: the first line of in when fromStdin is
// set, else from the terminal on in, twice and without echo. It refuses to
// read a password from a non-terminal without fromStdin, so a script cannot
// hang on a prompt.
func ReadPassword(in *os.File, prompt io.Writer, fromStdin bool) (string, error) {
	if fromStdin {
		line, err := bufio.NewReader(in).ReadString('\n')
		if err != nil && !(errors.Is(err, io.EOF) && line != "") {
			return "", fmt.Errorf("read the password from standard input: %w", err)
		}
		return strings.TrimRight(line, "\r\n"), nil
	}
	fd := int(in.Fd())
	if !term.IsTerminal(fd) {
		return "", errors.New("standard input is not a terminal: pass the password with --password-stdin")
	}
	read := func(label string) (string, error) {
		fmt.Fprint(prompt, label)
		b, err := term.ReadPassword(fd)
		fmt.Fprintln(prompt)
		return string(b), err
	}
	p1, err := read(fmt.Sprintf("Password (at least %d characters): ", seckill.MinAdminPasswordLen))
	if err != nil {
		return "", err
	}
	p2, err := read("Again: ")
	if err != nil {
		return "", err
	}
	if p1 != p2 {
		return "", errors.New("the passwords differ")
	}
	return p1, nil
}
