package web

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/nikolalohinski/gonja/v2/builtins"
	"github.com/nikolalohinski/gonja/v2/config"
	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/loaders"
)

// A chatTemplate is a model's chat_template (Jinja, as in a Hugging Face
// tokenizer_config.json) compiled as dstack compiles it for a `format: tgi`
// model: trim_blocks and lstrip_blocks, with raise_exception
// (dstack src/dstack/_internal/proxy/lib/services/model_proxy/clients/tgi.py).
type chatTemplate struct {
	tpl *exec.Template
}

// chatTemplateEnv is the environment chat templates run in: gonja's
// builtins and raise_exception, the one function Hugging Face's
// apply_chat_template adds that dstack adds too.
var chatTemplateEnv = &exec.Environment{
	Context: exec.EmptyContext().Update(builtins.GlobalFunctions).Update(exec.NewContext(map[string]any{
		"raise_exception": func(_ *exec.Evaluator, params *exec.VarArgs) *exec.Value {
			msg := ""
			if len(params.Args) > 0 {
				msg = params.Args[0].String()
			}
			return exec.AsValue(errors.New(msg))
		},
	})),
	Filters:           builtins.Filters,
	Tests:             builtins.Tests,
	ControlStructures: builtins.ControlStructures,
	Methods:           builtins.Methods,
}

// compileChatTemplate parses a chat template.
func compileChatTemplate(src string) (*chatTemplate, error) {
	cfg := config.New()
	cfg.TrimBlocks, cfg.LeftStripBlocks = true, true
	loader, err := loaders.NewFileSystemLoader("")
	if err != nil {
		return nil, fmt.Errorf("compile chat template: %w", err)
	}
	const root = "chat_template"
	shifted, err := loaders.NewShiftedLoader(root, strings.NewReader(src), loader)
	if err != nil {
		return nil, fmt.Errorf("compile chat template: %w", err)
	}
	tpl, err := exec.NewTemplate(root, cfg, shifted, chatTemplateEnv)
	if err != nil {
		return nil, fmt.Errorf("compile chat template: %w", err)
	}
	return &chatTemplate{tpl: tpl}, nil
}

// render renders messages (each a map of role, content and any other
// field of the request's message) into a prompt, with
// add_generation_prompt true as dstack renders it. eos_token is the
// model's; bos_token is empty, because TGI adds the beginning-of-sequence
// token itself when it tokenizes the inputs of /generate.
func (t *chatTemplate) render(messages []map[string]any, eosToken string) (prompt string, err error) {
	defer func() {
		// gonja panics on some malformed input; a request must not take
		// the server down.
		if r := recover(); r != nil {
			err = fmt.Errorf("render chat template: %v", r)
		}
	}()
	ctx := exec.NewContext(map[string]any{
		"messages":              messages,
		"add_generation_prompt": true,
		"bos_token":             "",
		"eos_token":             eosToken,
	})
	out, err := t.tpl.ExecuteToString(ctx)
	if err != nil {
		return "", fmt.Errorf("render chat template: %w", err)
	}
	return out, nil
}

// chatTemplates caches compiled templates by their source: a service's
// template is compiled once, not on every request.
type chatTemplates struct {
	mu sync.Mutex
	m  map[string]*chatTemplate
}

// get returns src compiled.
func (c *chatTemplates) get(src string) (*chatTemplate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t, ok := c.m[src]; ok {
		return t, nil
	}
	t, err := compileChatTemplate(src)
	if err != nil {
		return nil, err
	}
	if c.m == nil || len(c.m) >= 64 { // templates of services gone: start over
		c.m = map[string]*chatTemplate{}
	}
	c.m[src] = t
	return t, nil
}
