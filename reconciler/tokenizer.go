package reconciler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"hoist/schema"
	"hoist/store"
)

// DefaultHFEndpoint is the Hugging Face Hub, where the tokenizer
// configuration of a `format: tgi` model is read when its spec gives no
// chat_template or eos_token.
const DefaultHFEndpoint = "https://huggingface.co"

// hfTimeout bounds reading a tokenizer configuration, as dstack's 10 s.
const hfTimeout = 10 * time.Second

// maxTokenizerConfig bounds a tokenizer_config.json (some carry large
// added-token tables).
const maxTokenizerConfig = 16 << 20

// needsTokenizerConfig reports whether spec is a service with a tgi model
// whose chat_template or eos_token the Hub must give.
func needsTokenizerConfig(spec runSpec) bool {
	m := spec.Model
	return schema.Kind(spec.Type) == schema.KindService && m != nil && m.Format == "tgi" &&
		(m.ChatTemplate == "" || m.EOSToken == "")
}

// completeModel fills a tgi model's missing chat_template and eos_token
// from its tokenizer_config.json on the Hub, with the run's HF_TOKEN (or
// HUGGING_FACE_HUB_TOKEN) when its env has one, and writes them into the
// run's spec, where the service's route reads them: dstack does this when
// it registers the service (dstack
// src/dstack/_internal/server/services/services/options.py). When the Hub
// does not give them the run fails with a message saying why (ok false): a
// tgi model is never served without its template.
func (c *Controller) completeModel(ctx context.Context, l store.Lease, run *store.Run, spec *runSpec) (ok bool, err error) {
	m := spec.Model
	token := ""
	env, err := c.resolveJobSecrets(ctx, *spec)
	var miss *missingSecretError
	switch {
	case errors.As(err, &miss):
		// The job fails for the missing secret; the Hub is asked without.
	case err != nil:
		return false, err
	default:
		token = env.env["HF_TOKEN"]
		if token == "" {
			token = env.env["HUGGING_FACE_HUB_TOKEN"]
		}
	}
	tmpl, eos, ferr := c.tokenizerConfig(ctx, m.Name, token)
	if ferr == nil {
		if m.ChatTemplate == "" {
			if m.ChatTemplate = tmpl; tmpl == "" {
				ferr = errors.New("its tokenizer_config.json has no chat_template; set model.chat_template")
			}
		}
		if m.EOSToken == "" {
			if m.EOSToken = eos; eos == "" && ferr == nil {
				ferr = errors.New("its tokenizer_config.json has no eos_token; set model.eos_token")
			}
		}
	}
	if ferr != nil {
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		msg := fmt.Sprintf("model %s (format tgi): %v", m.Name, ferr)
		run.Status, run.TerminationReason, run.StatusMessage = store.RunTerminating, runReasonServerError, msg
		if err := c.st.UpdateRunLeased(ctx, l, run); err != nil {
			return false, err
		}
		c.event(ctx, "run", run.Name, run.ID, "terminating", run.Revision, "run failing: "+msg)
		return false, nil
	}
	b, err := withModel(run.Spec, m)
	if err != nil {
		return false, err
	}
	run.Spec = b
	if err := c.st.UpdateRunLeased(ctx, l, run); err != nil {
		return false, err
	}
	c.log.Info("model_template_fetched", "run", run.Name, "model", m.Name)
	return true, nil
}

// withModel returns the run spec with its model's chat_template and
// eos_token set. The spec hash is left alone: it names what Git asked for.
func withModel(spec []byte, m *schema.Model) ([]byte, error) {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(spec, &doc); err != nil {
		return nil, fmt.Errorf("run spec: %w", err)
	}
	var model map[string]any
	if err := json.Unmarshal(doc["model"], &model); err != nil || model == nil {
		return nil, fmt.Errorf("run spec's model: %w", err)
	}
	model["chat_template"], model["eos_token"] = m.ChatTemplate, m.EOSToken
	mb, err := json.Marshal(model)
	if err != nil {
		return nil, fmt.Errorf("run spec's model: %w", err)
	}
	doc["model"] = mb
	out, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("run spec: %w", err)
	}
	return out, nil
}

// tokenizerConfig reads model's chat template and end of sequence token
// from <HF endpoint>/<model>/resolve/main/tokenizer_config.json, as dstack's
// get_tokenizer_config does.
func (c *Controller) tokenizerConfig(ctx context.Context, model, token string) (chatTemplate, eosToken string, err error) {
	endpoint := strings.TrimRight(c.cfg.HFEndpoint, "/")
	if endpoint == "" {
		endpoint = DefaultHFEndpoint
	}
	segs := strings.Split(model, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	u := endpoint + "/" + strings.Join(segs, "/") + "/resolve/main/tokenizer_config.json"
	ctx, cancel := context.WithTimeout(ctx, hfTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", "", fmt.Errorf("failed to get tokenizer info: %w", err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.hf.Do(req)
	if err != nil {
		return "", "", fmt.Errorf("failed to get tokenizer info: %w", err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusUnauthorized && token == "":
		return "", "", fmt.Errorf("failed to access gated model %s (%s); set HF_TOKEN in the service's env", model, resp.Status)
	case resp.StatusCode == http.StatusUnauthorized:
		return "", "", fmt.Errorf("failed to access gated model %s (%s); the service's HF_TOKEN is not valid for it", model, resp.Status)
	case resp.StatusCode == http.StatusForbidden:
		return "", "", fmt.Errorf("private Hugging Face models are not supported (%s: %s)", u, resp.Status)
	case resp.StatusCode != http.StatusOK:
		return "", "", fmt.Errorf("failed to get tokenizer info: %s: %s", u, resp.Status)
	}
	var cfg struct {
		ChatTemplate json.RawMessage `json:"chat_template"`
		EOSToken     json.RawMessage `json:"eos_token"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxTokenizerConfig)).Decode(&cfg); err != nil {
		return "", "", fmt.Errorf("failed to get tokenizer info: %s: %w", u, err)
	}
	return templateOf(cfg.ChatTemplate), tokenOf(cfg.EOSToken), nil
}

// templateOf is a tokenizer config's chat_template: a string, or a list
// of named templates of which the one named "default" is the chat
// template (transformers' tokenization_utils_base.py).
func templateOf(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var named []struct {
		Name     string `json:"name"`
		Template string `json:"template"`
	}
	if json.Unmarshal(raw, &named) == nil {
		for _, n := range named {
			if n.Name == "default" {
				return n.Template
			}
		}
	}
	return ""
}

// tokenOf is a tokenizer config's special token: a string, or an added
// token object whose content it is.
func tokenOf(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var tok struct {
		Content string `json:"content"`
	}
	if json.Unmarshal(raw, &tok) == nil {
		return tok.Content
	}
	return ""
}
