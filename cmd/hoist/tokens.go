package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"hoist/web"
	"hoist/web/client"
)

func newTokenCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Create, list and revoke API tokens on a running hoist server",
		Long: `Create, list and revoke API tokens. A token's secret is printed once, when it
is created: the server keeps only its SHA-256 hash. Everyone manages their own
tokens; global admins manage everyone's.`,
	}
	cmd.AddCommand(newTokenCreateCmd(), newTokenListCmd(), newTokenRevokeCmd())
	return cmd
}

// parseExpiry reads --expires: a Go duration ("12h") or a number of days
// ("30d"); "" and "0" never expire.
func parseExpiry(s string) (time.Duration, error) {
	if s == "" || s == "0" {
		return 0, nil
	}
	if d, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(d)
		if err != nil || n <= 0 {
			return 0, fmt.Errorf("invalid --expires %q: days must be a positive whole number", s)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("invalid --expires %q: use a number of days (30d) or a duration (12h)", s)
	}
	return d, nil
}

func newTokenCreateCmd() *cobra.Command {
	var o clientOptions
	var user, expires string
	cmd := &cobra.Command{
		Use:   "create NAME",
		Short: "Create a token and print its secret (shown once)",
		Long: `Create token NAME (unique among the user's tokens) for yourself, or with
--user for another user (global admins). The secret is printed on standard
output, once; --expires (30d, 12h; 0 never) ends it.

` + clientHelp + "\n\n" + exitHelp,
		Args: cobra.ExactArgs(1),
	}
	cmd.Flags().StringVar(&user, "user", "", "the token's user (default: you; others need a global admin)")
	cmd.Flags().StringVar(&expires, "expires", "30d", "lifetime: days (30d) or a duration (12h); 0 never expires")
	o.addFlags(cmd.Flags())
	var life time.Duration
	check := func() (err error) {
		life, err = parseExpiry(expires)
		return err
	}
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		c, err := o.connect(cmd, check)
		if err != nil {
			return err
		}
		req := web.NewToken{Name: args[0], User: user}
		if life > 0 {
			exp := time.Now().Add(life).UTC()
			req.ExpiresAt = &exp
		}
		t, err := c.CreateToken(cmd.Context(), req)
		if err != nil {
			return fmt.Errorf("token: %w", err)
		}
		until := "never expires"
		if t.ExpiresAt != nil {
			until = "expires " + t.ExpiresAt.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "token %s (id %s) of %s, %s; it is not shown again:\n", t.Name, t.ID, t.User, until)
		fmt.Fprintln(cmd.OutOrStdout(), t.Secret)
		return nil
	}
	return cmd
}

func newTokenListCmd() *cobra.Command {
	stamp := func(t *time.Time, none string) string {
		if t == nil {
			return none
		}
		return t.UTC().Format(time.RFC3339)
	}
	return listCmd(listing[web.Token]{
		cmd: &cobra.Command{
			Use:   "list",
			Short: "List your tokens (everyone's for global admins), never their secrets",
			Long:  "List tokens: id, name, user, expiry, last use and whether revoked.\n\n" + clientHelp + "\n\n" + exitHelp,
			Args:  cobra.NoArgs,
		},
		what: "token",
		fetch: func(ctx context.Context, c *client.Client, _ []string) ([]web.Token, error) {
			return c.Tokens(ctx)
		},
		header: "ID\tNAME\tUSER\tEXPIRES\tLAST USED\tSTATE",
		row: func(t web.Token) string {
			state := "active"
			if t.Revoked {
				state = "revoked"
			} else if t.ExpiresAt != nil && !time.Now().Before(*t.ExpiresAt) {
				state = "expired"
			}
			return strings.Join([]string{t.ID, t.Name, t.User, stamp(t.ExpiresAt, "never"), stamp(t.LastUsedAt, "-"), state}, "\t")
		},
	})
}

func newTokenRevokeCmd() *cobra.Command {
	var o clientOptions
	cmd := &cobra.Command{
		Use:   "revoke ID",
		Short: "Revoke a token by id (see hoist token list)",
		Long:  "Revoke the token with id ID: it is refused from now on.\n\n" + clientHelp + "\n\n" + exitHelp,
		Args:  cobra.ExactArgs(1),
	}
	o.addFlags(cmd.Flags())
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		c, err := o.connect(cmd)
		if err != nil {
			return err
		}
		if err := c.RevokeToken(cmd.Context(), args[0]); err != nil {
			return fmt.Errorf("token: %w", err)
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "token %s revoked\n", args[0])
		return nil
	}
	return cmd
}
