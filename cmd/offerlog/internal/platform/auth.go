package platform

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/cmd/offerlog/internal/auth"
)

// AdminTokenFile is where the embedded broker's first start writes an
// admin token, in the data directory (mode 0600).
const AdminTokenFile = "admin.token"

// startAuth follows the tokens (or, with Insecure, takes every caller for
// an admin, and says so). With the embedded broker and no admin token file
// yet, it creates an admin token and writes it there.
func startAuth(ctx context.Context, p *process) error {
	if p.cfg.Insecure {
		p.auth = auth.Off(p.log)
		p.info.Insecure = true
		return nil
	}
	store := auth.NewStore()
	p.sup.Go(ctx, "tokens", false, func(ctx context.Context) error { return store.Follow(ctx, p.kafka, p.log) })
	p.ready = append(p.ready, store.Ready())
	p.auth = auth.On(store)
	if !p.info.Embedded {
		return nil
	}
	path := filepath.Join(p.cfg.DataDir, AdminTokenFile)
	p.info.AdminToken = path
	if _, err := os.Stat(path); err == nil {
		p.log.Info("auth is on; the admin token is in "+path, "file", path)
		return nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("admin token: %w", err)
	}
	prod, err := p.producer("offerlog-tokens")
	if err != nil {
		return err
	}
	if err := CreateAdminToken(ctx, prod, path); err != nil {
		return err
	}
	p.log.Info("auth is on; an admin token was created in "+path+" (offerlog token create makes others)", "file", path)
	return nil
}

// CreateAdminToken appends a new admin token to auth.tokens and writes its
// text to path (mode 0600), replacing what was there only once the token
// is acknowledged.
func CreateAdminToken(ctx context.Context, prod *kgo.Client, path string) error {
	text, rec, err := auth.New(auth.Admin, "", 0, time.Now())
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := auth.Append(ctx, prod, rec); err != nil {
		return fmt.Errorf("admin token: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(text+"\n"), 0o600); err != nil {
		return fmt.Errorf("admin token: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("admin token: %w", err)
	}
	return nil
}
