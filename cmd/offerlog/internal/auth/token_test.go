package auth

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestTokensAuthenticateOnlyWhileValid(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	s := NewStore()
	s.now = func() time.Time { return now }
	text, rec, err := New(Seller, "s1", time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	s.Put(rec)
	if sc, err := s.Authenticate(text); err != nil || sc.Kind != Seller || sc.Subject != "s1" || sc.TokenID != rec.ID {
		t.Fatalf("fresh token: %+v %v", sc, err)
	}
	if strings.Contains(string(rec.Hash), text) || len(rec.Hash) != 32 {
		t.Fatal("the record must hold a SHA-256, not the text")
	}
	// Another secret with the same id, an unknown id, garbage: refused.
	forged := text[:len(text)-4] + "AAAA"
	_, other, _ := New(Seller, "s1", 0, now)
	for _, bad := range []string{forged, "olt_" + other.ID + "_x", "Bearer", "", "olt_"} {
		if _, err := s.Authenticate(bad); !errors.Is(err, ErrUnauthenticated) {
			t.Errorf("%q: %v, want unauthenticated", bad, err)
		}
	}
	now = now.Add(time.Hour)
	if _, err := s.Authenticate(text); !errors.Is(err, ErrUnauthenticated) || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("expired token: %v", err)
	}
	now = now.Add(-time.Minute)
	rec.RevokedAt = now.UnixMilli()
	if _, err := s.Authenticate(text); !errors.Is(err, ErrUnauthenticated) || !strings.Contains(err.Error(), "revoked") {
		t.Fatalf("revoked token: %v", err)
	}
}

func TestScopes(t *testing.T) {
	admin, seller := Scope{Kind: Admin}, Scope{Kind: Seller, Subject: "s1"}
	if !admin.Allows(Seller, "s9") || !admin.Allows(Stage, "x") || admin.CheckAdmin("x") != nil {
		t.Fatal("an admin may do everything")
	}
	if !seller.Allows(Seller, "s1") || seller.Allows(Seller, "s2") || seller.Allows(Client, "s1") || seller.CheckAdmin("x") == nil {
		t.Fatal("a seller acts for itself only")
	}
	if (Scope{}).Allows(Seller, "") || (Scope{Kind: Seller}).Allows(Seller, "") {
		t.Fatal("no scope, or an empty subject, allows nothing")
	}
	if _, _, err := New(Admin, "x", 0, time.Now()); err == nil {
		t.Fatal("an admin token with a subject")
	}
	if _, _, err := New(Client, strings.Repeat("c", 2000), 0, time.Now()); err == nil {
		t.Fatal("a subject over 1 KiB")
	}
}
