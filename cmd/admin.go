package cmd

import (
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/capturedev/capture/forward/apiclient"
	"github.com/capturedev/capture/server"
	"github.com/capturedev/capture/server/api"
	"github.com/capturedev/capture/server/api/contract"
	"github.com/capturedev/capture/store"
	"github.com/capturedev/capture/store/datadir"
)

// addresses describes SMTP and capture URLs as the running serve announced
// them, or with none running the last one did (SPEC §2a); by the serve
// defaults on a database no serve has run on yet.
func addresses(c *cobra.Command, st *store.Store) (api.Config, error) {
	a, ok, err := st.Addresses(c.Context())
	if err != nil {
		return api.Config{}, err
	}
	if !ok {
		a = store.Addresses{SMTPHost: "localhost", StartTLSPorts: []int{587, 2587}, TLSPorts: []int{465},
			CaptureBase: "http://" + defaultCaptureAddr}
	}
	return api.Config{SMTPHost: a.SMTPHost, StartTLSPorts: a.StartTLSPorts, TLSPorts: a.TLSPorts,
		CaptureBase: a.CaptureBase}, nil
}

// smtpLine says where to send mail, as serve's banner does.
func smtpLine(cfg api.Config) string {
	return server.SMTPSummary(cfg.SMTPHost, cfg.StartTLSPorts, cfg.TLSPorts)
}

func newTable(c *cobra.Command) *tabwriter.Writer {
	return tabwriter.NewWriter(c.OutOrStdout(), 0, 4, 2, ' ', 0)
}

func renderProject(p store.Project) contract.Project {
	return contract.Project{ID: p.ID, Name: p.Name, Plan: p.Plan.Name, CreatedAt: contract.Time{Time: p.CreatedAt}}
}

func newProjectCmd() *cobra.Command {
	c := &cobra.Command{Use: "project", Short: "Create and list projects (the scope of keys, inboxes and endpoints)"}

	create := &cobra.Command{
		Use: "create NAME", Short: "Create a project", Args: exactArgs("project name"),
		Example: "  capture project create staging --plan pro",
		RunE: func(c *cobra.Command, args []string) error {
			plan, _ := c.Flags().GetString("plan")
			if _, err := store.LookupPlan(plan); err != nil {
				return usagef("--plan: %v", err)
			}
			return withStore(c, func(st *store.Store) error {
				p, err := st.CreateProject(c.Context(), args[0], plan)
				if err != nil {
					return refusedValue(err)
				}
				if wantJSON(c) {
					return printJSON(c.OutOrStdout(), renderProject(p))
				}
				fprintf(c.OutOrStdout(), "created project %s (%s) on plan %s\n", p.Name, p.ID, p.Plan.Name)
				return nil
			})
		},
	}
	create.Flags().String("plan", "free", "plan: "+strings.Join(store.PlanNames(), ", "))
	jsonFlag(create)

	list := &cobra.Command{
		Use: "list", Short: "List projects", Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return withStore(c, func(st *store.Store) error {
				ps, err := st.Projects(c.Context())
				if err != nil {
					return err
				}
				if wantJSON(c) {
					return printJSON(c.OutOrStdout(), renderAll(ps, renderProject))
				}
				tw := newTable(c)
				fmt.Fprintln(tw, "ID\tNAME\tPLAN\tCREATED")
				for _, p := range ps {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", p.ID, p.Name, p.Plan.Name, contract.FormatTime(p.CreatedAt))
				}
				return tw.Flush()
			})
		},
	}
	jsonFlag(list)

	setPlan := &cobra.Command{
		Use: "set-plan PROJECT PLAN", Short: "Move a project to another plan", Args: exactArgs("project id or name", "plan"),
		Example: "  capture project set-plan default pro",
		RunE: func(c *cobra.Command, args []string) error {
			if _, err := store.LookupPlan(args[1]); err != nil {
				return usagef("%v", err)
			}
			return withStore(c, func(st *store.Store) error {
				p, err := st.SetPlan(c.Context(), args[0], args[1])
				if err != nil {
					return err
				}
				fprintf(c.OutOrStdout(), "project %s (%s) is now on plan %s\n", p.Name, p.ID, p.Plan.Name)
				return nil
			})
		},
	}
	c.AddCommand(create, list, setPlan)
	return c
}

func renderKey(k store.Key) contract.Key {
	return contract.Key{ID: k.ID, ProjectID: k.ProjectID, CreatedAt: contract.Time{Time: k.CreatedAt}, RevokedAt: contract.TimeOf(k.RevokedAt)}
}

// renderAll is a whole list for --json: {"items": [...]}.
func renderAll[S, T any](items []S, render func(S) T) map[string][]T {
	out := make([]T, len(items))
	for i, item := range items {
		out[i] = render(item)
	}
	return map[string][]T{"items": out}
}

func newKeyCmd() *cobra.Command {
	c := &cobra.Command{Use: "key", Short: "Create, list and revoke API keys"}

	create := &cobra.Command{
		Use: "create", Short: "Create an API key (shown once)", Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if save, _ := c.Flags().GetBool("save"); save {
				url, err := database(c)
				if err != nil {
					return err
				}
				if url != "" {
					// credentials.json pairs a key with the data dir's own
					// serve; on PostgreSQL there is none (README).
					return usagef("--save writes the data dir's credentials.json, which PostgreSQL mode does not use: " +
						"drop --save and pass the key to tui, forward, wait and mcp with CAPTURE_API_KEY")
				}
			}
			return withStore(c, func(st *store.Store) error {
				p, err := resolveProject(c, st)
				if err != nil {
					return err
				}
				k, secret, err := st.CreateKey(c.Context(), p.ID)
				if err != nil {
					return overQuota(err, p, fmt.Sprintf("revoke one first (`capture key list --project %s`, then `capture key revoke KEY_ID`), or ", p.ID))
				}
				// The key is printed before it is saved, so that it is not
				// lost when saving fails.
				var perr error
				if wantJSON(c) {
					out := renderKey(k)
					out.Secret = secret
					perr = printJSON(c.OutOrStdout(), out)
				} else {
					_, perr = fmt.Fprintf(c.OutOrStdout(), "created key %s in project %s; it is shown only now:\n%s\n", k.ID, p.Name, secret)
				}
				save, _ := c.Flags().GetBool("save")
				if perr != nil {
					// The key exists, and counts against the plan: say so,
					// and how to be rid of it.
					msg := fmt.Sprintf("created key %s in project %s, but could not print it (%v)", k.ID, p.Name, perr)
					if save {
						if path, err := saveKey(c, st, secret); err == nil {
							return fmt.Errorf("%s; it is saved in %s", msg, path)
						}
					}
					return fmt.Errorf("%s: `capture key revoke %s` revokes it; then create another", msg, k.ID)
				}
				if save {
					path, err := saveKey(c, st, secret)
					if err != nil {
						return fmt.Errorf("key %s not saved: %w", k.ID, err)
					}
					if !wantJSON(c) {
						fprintf(c.OutOrStdout(), "saved in %s: tui, forward and mcp use it from now on\n", path)
					}
				}
				return nil
			})
		},
	}
	projectFlag(create)
	jsonFlag(create)
	create.Flags().Bool("save", false, "write the new key into the data dir's credentials.json, for tui, forward and mcp")

	list := &cobra.Command{
		Use: "list", Short: "List a project's API keys", Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return withStore(c, func(st *store.Store) error {
				p, err := resolveProject(c, st)
				if err != nil {
					return err
				}
				keys, err := st.Keys(c.Context(), p.ID)
				if err != nil {
					return err
				}
				if wantJSON(c) {
					return printJSON(c.OutOrStdout(), renderAll(keys, renderKey))
				}
				tw := newTable(c)
				fmt.Fprintln(tw, "ID\tCREATED\tSTATUS")
				for _, k := range keys {
					status := "active"
					if k.RevokedAt != nil {
						status = "revoked " + contract.FormatTime(*k.RevokedAt)
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\n", k.ID, contract.FormatTime(k.CreatedAt), status)
				}
				return tw.Flush()
			})
		},
	}
	projectFlag(list)
	jsonFlag(list)

	revoke := &cobra.Command{
		Use: "revoke KEY_ID", Short: "Revoke an API key for good", Args: exactArgs("key id"),
		RunE: func(c *cobra.Command, args []string) error {
			return withStore(c, func(st *store.Store) error {
				// Which key credentials.json holds can only be told
				// before it is revoked.
				saved, path := savedKeyID(c, st)
				k, err := st.RevokeKey(c.Context(), args[0])
				if err != nil {
					return err
				}
				fprintf(c.OutOrStdout(), "revoked key %s\n", k.ID)
				if saved == k.ID {
					fprintf(c.OutOrStdout(), "it was the key in %s: tui, forward and mcp fail with it until you run `capture key create --save`\n", path)
				}
				return nil
			})
		},
	}
	c.AddCommand(create, list, revoke)
	return c
}

// savedKeyID is the id of the active key credentials.json holds, and the
// file's path; "" when there is none.
func savedKeyID(c *cobra.Command, st *store.Store) (id, path string) {
	dir, err := dataDir(c)
	if err != nil {
		return "", ""
	}
	creds, err := datadir.ReadCredentials(dir)
	if err != nil || creds.Key == "" {
		return "", ""
	}
	k, _, err := st.Authenticate(c.Context(), creds.Key)
	if err != nil {
		return "", ""
	}
	return k.ID, filepath.Join(dir, datadir.CredentialsFile)
}

// saveKey writes secret into credentials.json (SPEC §2a), keeping its API
// URL, else the one serve announced; it returns the file's path.
func saveKey(c *cobra.Command, st *store.Store, secret string) (string, error) {
	dir, err := dataDir(c)
	if err != nil {
		return "", err
	}
	creds, _ := datadir.ReadCredentials(dir)
	if creds.API == "" {
		a, ok, err := st.Addresses(c.Context())
		if err != nil {
			return "", err
		}
		creds.API = apiclient.DefaultAPI
		if ok {
			creds.API = a.APIBase
		}
	}
	creds.Key = secret
	if err := datadir.WriteCredentials(dir, creds); err != nil {
		return "", err
	}
	return filepath.Join(dir, datadir.CredentialsFile), nil
}

func newInboxCmd() *cobra.Command {
	c := &cobra.Command{Use: "inbox", Short: "Create and list inboxes, reveal or rotate SMTP passwords"}

	create := &cobra.Command{
		Use: "create", Short: "Create an inbox", Args: noArgs,
		Example: "  capture inbox create --name signup-tests --json",
		RunE: func(c *cobra.Command, _ []string) error {
			return withStore(c, func(st *store.Store) error {
				p, err := resolveProject(c, st)
				if err != nil {
					return err
				}
				name, err := nameOrFree(c, func() ([]string, error) {
					items, err := allInboxes(c, st, p.ID)
					return namesOf(items, func(in store.Inbox) string { return in.Name }), err
				})
				if err != nil {
					return err
				}
				in, err := st.CreateInbox(c.Context(), p.ID, name)
				if err != nil {
					return overQuota(refusedValue(err), p, "")
				}
				cfg, err := addresses(c, st)
				if err != nil {
					return err
				}
				if wantJSON(c) {
					err = printJSON(c.OutOrStdout(), contract.NewInbox{
						Inbox: api.RenderInbox(in, cfg), SMTPPassword: in.SMTPPassword})
				} else {
					_, err = fmt.Fprintf(c.OutOrStdout(), "created inbox %s (%s)\nSMTP: %s\nSMTP username: %s\nSMTP password: %s\n",
						in.Name, in.ID, smtpLine(cfg), in.ID, in.SMTPPassword)
				}
				if err != nil {
					return fmt.Errorf("created inbox %s (%s), but could not print it (%v): `capture inbox password %s` prints its SMTP password",
						in.Name, in.ID, err, in.ID)
				}
				return nil
			})
		},
	}
	create.Flags().String("name", "", `inbox name (default "default", else the first free of "default-2", "default-3", …)`)
	projectFlag(create)
	jsonFlag(create)

	list := &cobra.Command{
		Use: "list", Short: "List a project's inboxes", Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return withStore(c, func(st *store.Store) error {
				p, err := resolveProject(c, st)
				if err != nil {
					return err
				}
				items, err := allInboxes(c, st, p.ID)
				if err != nil {
					return err
				}
				cfg, err := addresses(c, st)
				if err != nil {
					return err
				}
				if wantJSON(c) {
					return printJSON(c.OutOrStdout(), renderAll(items, func(in store.Inbox) contract.Inbox {
						return api.RenderInbox(in, cfg)
					}))
				}
				fprintf(c.OutOrStdout(), "SMTP: %s\n\n", smtpLine(cfg))
				tw := newTable(c)
				fmt.Fprintln(tw, "ID\tNAME\tMESSAGES\tCREATED")
				for _, in := range items {
					fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", in.ID, in.Name, in.MessageCount, contract.FormatTime(in.CreatedAt))
				}
				return tw.Flush()
			})
		},
	}
	projectFlag(list)
	jsonFlag(list)

	password := &cobra.Command{
		Use: "password INBOX_ID", Short: "Print an inbox's SMTP password (--rotate replaces it)", Args: exactArgs("inbox id"),
		RunE: func(c *cobra.Command, args []string) error {
			rotate, _ := c.Flags().GetBool("rotate")
			return withStore(c, func(st *store.Store) error {
				var in store.Inbox
				var err error
				if rotate {
					in, err = st.RotateInboxPassword(c.Context(), args[0])
				} else {
					in, err = st.Inbox(c.Context(), "", args[0])
				}
				if err != nil {
					return err
				}
				fprintf(c.OutOrStdout(), "%s\n", in.SMTPPassword)
				return nil
			})
		},
	}
	password.Flags().Bool("rotate", false, "replace the password; new SMTP sessions need the new one at once")
	c.AddCommand(create, list, password)
	return c
}

func newEndpointCmd() *cobra.Command {
	c := &cobra.Command{Use: "endpoint", Short: "Create, list and configure webhook endpoints"}

	create := &cobra.Command{
		Use: "create", Short: "Create a webhook endpoint", Args: noArgs,
		Example: "  capture endpoint create --name stripe --target http://localhost:3000 --json",
		RunE: func(c *cobra.Command, _ []string) error {
			var target *string
			if c.Flags().Changed("target") {
				t, _ := c.Flags().GetString("target")
				if err := store.ValidateTarget(t); err != nil {
					return usagef("--target: %v", err)
				}
				target = &t
			}
			return withStore(c, func(st *store.Store) error {
				p, err := resolveProject(c, st)
				if err != nil {
					return err
				}
				name, err := nameOrFree(c, func() ([]string, error) {
					items, err := allEndpoints(c, st, p.ID)
					return namesOf(items, func(e store.Endpoint) string { return e.Name }), err
				})
				if err != nil {
					return err
				}
				e, err := st.CreateEndpoint(c.Context(), p.ID, name, target)
				if err != nil {
					return overQuota(refusedValue(err), p, "")
				}
				cfg, err := addresses(c, st)
				if err != nil {
					return err
				}
				if wantJSON(c) {
					return printJSON(c.OutOrStdout(), api.RenderEndpoint(e, cfg.CaptureBase))
				}
				fprintf(c.OutOrStdout(), "created endpoint %s (%s)\ncapture URL: %s\n", e.Name, e.ID,
					api.CaptureURL(cfg.CaptureBase, e.ID))
				return nil
			})
		},
	}
	create.Flags().String("name", "", `endpoint name (default "default", else the first free of "default-2", "default-3", …)`)
	create.Flags().String("target", "", "saved replay target URL, e.g. http://localhost:3000")
	projectFlag(create)
	jsonFlag(create)

	list := &cobra.Command{
		Use: "list", Short: "List a project's endpoints", Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return withStore(c, func(st *store.Store) error {
				p, err := resolveProject(c, st)
				if err != nil {
					return err
				}
				items, err := allEndpoints(c, st, p.ID)
				if err != nil {
					return err
				}
				cfg, err := addresses(c, st)
				if err != nil {
					return err
				}
				base := cfg.CaptureBase
				if wantJSON(c) {
					return printJSON(c.OutOrStdout(), renderAll(items, func(e store.Endpoint) contract.Endpoint {
						return api.RenderEndpoint(e, base)
					}))
				}
				tw := newTable(c)
				fmt.Fprintln(tw, "ID\tNAME\tREQUESTS\tTARGET\tCAPTURE URL")
				for _, e := range items {
					target := "-"
					if e.TargetURL != nil {
						target = *e.TargetURL
					}
					fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", e.ID, e.Name, e.RequestCount, target, api.CaptureURL(base, e.ID))
				}
				return tw.Flush()
			})
		},
	}
	projectFlag(list)
	jsonFlag(list)

	set := &cobra.Command{
		Use:   "set ENDPOINT_ID",
		Short: "Set an endpoint's replay target and the response senders get",
		Args:  exactArgs("endpoint id"),
		Example: `  capture endpoint set whe_… --target http://localhost:3000
  capture endpoint set whe_… --response-status 202 --response-header 'X-Test: 1' --response-body ok --response-delay 500ms`,
		RunE: func(c *cobra.Command, args []string) error {
			u, err := endpointUpdate(c)
			if err != nil {
				return err
			}
			return withStore(c, func(st *store.Store) error {
				e, err := st.UpdateEndpoint(c.Context(), args[0], u)
				if err != nil {
					// What the store refuses here depends on the endpoint
					// as saved (a 204 given a body): still the flags' fault.
					return refusedValue(err)
				}
				cfg, err := addresses(c, st)
				if err != nil {
					return err
				}
				if wantJSON(c) {
					return printJSON(c.OutOrStdout(), api.RenderEndpoint(e, cfg.CaptureBase))
				}
				target := "none"
				if e.TargetURL != nil {
					target = *e.TargetURL
				}
				fprintf(c.OutOrStdout(), "endpoint %s (%s): target %s; responds %d after %s\n",
					e.ID, api.CaptureURL(cfg.CaptureBase, e.ID), target, e.Response.Status, e.Response.Delay)
				return nil
			})
		},
	}
	set.Flags().String("target", "", "saved replay target URL")
	set.Flags().Bool("no-target", false, "remove the saved target")
	set.Flags().Int("response-status", 0, "status code answered to senders (200–599)")
	set.Flags().StringArray("response-header", nil, "header answered to senders, 'Name: value' (repeatable; replaces all)")
	set.Flags().String("response-body", "", "body answered to senders")
	set.Flags().Duration("response-delay", 0, fmt.Sprintf("delay before answering, up to %s (e.g. 250ms)", store.MaxResponseDelay))
	setWant(set.Flags(), "response-delay", fmt.Sprintf("a duration from 0 to %s, such as 250ms or 2s", store.MaxResponseDelay))
	jsonFlag(set)
	c.AddCommand(create, list, set)
	return c
}

// nameOrFree is --name when given, else the first of "default",
// "default-2", "default-3", … that none of the names taken returns. A
// second inbox or endpoint named "default" would pass for the first one:
// `capture wait` watches the project's only one, else the one so named.
func nameOrFree(c *cobra.Command, taken func() ([]string, error)) (string, error) {
	if c.Flags().Changed("name") {
		name, _ := c.Flags().GetString("name")
		return name, nil
	}
	names, err := taken()
	if err != nil {
		return "", err
	}
	used := make(map[string]bool, len(names))
	for _, n := range names {
		used[n] = true
	}
	name := store.DefaultName
	for i := 2; used[name]; i++ {
		name = fmt.Sprintf("%s-%d", store.DefaultName, i)
	}
	return name, nil
}

// allInboxes is every inbox of the project, page after page.
func allInboxes(c *cobra.Command, st *store.Store, projectID string) ([]store.Inbox, error) {
	return contract.All(func(before string) ([]store.Inbox, string, error) {
		l, err := st.Inboxes(c.Context(), projectID, store.Page{Before: before, Limit: store.MaxLimit})
		return l.Items, l.Next, err
	})
}

// allEndpoints is every endpoint of the project, page after page.
func allEndpoints(c *cobra.Command, st *store.Store, projectID string) ([]store.Endpoint, error) {
	return contract.All(func(before string) ([]store.Endpoint, string, error) {
		l, err := st.Endpoints(c.Context(), projectID, store.Page{Before: before, Limit: store.MaxLimit})
		return l.Items, l.Next, err
	})
}

func namesOf[T any](items []T, name func(T) string) []string {
	names := make([]string, len(items))
	for i, item := range items {
		names[i] = name(item)
	}
	return names
}

// endpointUpdate reads what `endpoint set` was asked to change; the store's
// own rules decide what is valid, before the database is opened.
func endpointUpdate(c *cobra.Command) (store.EndpointUpdate, error) {
	var u store.EndpointUpdate
	f := c.Flags()
	if f.Changed("target") && f.Changed("no-target") {
		return u, usagef("--target and --no-target exclude each other")
	}
	if f.Changed("target") {
		t, _ := f.GetString("target")
		u.Target = &t
	}
	if noTarget, _ := f.GetBool("no-target"); noTarget {
		u.ClearTarget = true
	}
	if f.Changed("response-status") {
		s, _ := f.GetInt("response-status")
		u.Status = &s
	}
	if f.Changed("response-header") {
		hs, _ := f.GetStringArray("response-header")
		u.Headers = map[string]string{}
		for _, h := range hs {
			name, value, ok := strings.Cut(h, ":")
			if !ok {
				return u, usagef("--response-header %q: want 'Name: value'", h)
			}
			name = http.CanonicalHeaderKey(strings.TrimSpace(name))
			if _, twice := u.Headers[name]; twice {
				return u, usagef("--response-header %s given twice: a response holds one value per header", name)
			}
			u.Headers[name] = strings.TrimSpace(value)
		}
	}
	if f.Changed("response-body") {
		b, _ := f.GetString("response-body")
		u.Body = &b
	}
	if f.Changed("response-delay") {
		d, _ := f.GetDuration("response-delay")
		u.Delay = &d
	}
	if u.Target == nil && !u.ClearTarget && u.Status == nil && u.Headers == nil && u.Body == nil && u.Delay == nil {
		return u, usagef("nothing to set: give --target, --no-target or a --response-* flag")
	}
	if err := u.Validate(); err != nil {
		return u, usageError{err}
	}
	return u, nil
}

// overQuota adds to a refusal for want of room in the project's plan what
// the user can do about it: first (when there is something), or move the
// project to the next larger plan, if there is one. The project is named
// by its id, which needs no quoting in a shell.
func overQuota(err error, p store.Project, first string) error {
	if !errors.Is(err, store.ErrQuotaExceeded) {
		return err
	}
	names := store.PlanNames()
	i := slices.Index(names, p.Plan.Name)
	if i < 0 || i == len(names)-1 {
		if first == "" {
			return err
		}
		return fmt.Errorf("%w; %s", err, strings.TrimSuffix(first, ", or "))
	}
	return fmt.Errorf("%w; %smove the project to a larger plan (`capture project set-plan %s %s`)", err, first, p.ID, names[i+1])
}

// refusedValue makes a value the store refuses (a name too long, a bad
// target) the usage error it is: it came from a flag or an argument.
func refusedValue(err error) error {
	if errors.Is(err, store.ErrInvalid) {
		return usageError{err}
	}
	return err
}
