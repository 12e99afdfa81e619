package web

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/nikolalohinski/gonja/v2/builtins"
	controlStructures "github.com/nikolalohinski/gonja/v2/builtins/control_structures"
	"github.com/nikolalohinski/gonja/v2/config"
	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/loaders"
	"github.com/nikolalohinski/gonja/v2/nodes"
	"github.com/nikolalohinski/gonja/v2/parser"
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
// apply_chat_template adds that dstack adds too. As in dstack's sandboxed
// Jinja environment without a loader, a template reads no other template
// (no include, import, from or extends), and, unlike Jinja, gonja has no
// recursion limit of its own: a macro calls macros at most maxMacroDepth
// deep, so that a template cannot overflow the server's stack.
var chatTemplateEnv = &exec.Environment{
	Context: exec.EmptyContext().Update(builtins.GlobalFunctions).Update(exec.NewContext(map[string]any{
		"raise_exception": func(_ *exec.Evaluator, params *exec.VarArgs) *exec.Value {
			msg := ""
			if len(params.Args) > 0 {
				msg = params.Args[0].String()
			}
			return exec.AsValue(errors.New(msg))
		},
		"range": boundedRange,
	})),
	Filters:           builtins.Filters,
	Tests:             builtins.Tests,
	ControlStructures: chatControlStructures(),
	Methods:           builtins.Methods,
}

// maxRange is the most items range gives, Jinja's sandbox's MAX_RANGE
// (jinja2/sandbox.py).
const maxRange = 100_000

// boundedRange is Python's range as a list of at most maxRange items
// (gonja's own feeds a channel from a goroutine, which a loop left early
// never lets go).
func boundedRange(params *exec.VarArgs) *exec.Value {
	start, stop, step := 0, 0, 1
	for _, a := range params.Args {
		if !a.IsInteger() {
			return exec.AsValue(errors.New("range: expected [start, ]stop[, step] where all arguments are integers"))
		}
	}
	switch len(params.Args) {
	case 1:
		stop = params.Args[0].Integer()
	case 2:
		start, stop = params.Args[0].Integer(), params.Args[1].Integer()
	case 3:
		start, stop, step = params.Args[0].Integer(), params.Args[1].Integer(), params.Args[2].Integer()
	default:
		return exec.AsValue(errors.New("range: expected [start, ]stop[, step] where all arguments are integers"))
	}
	if step == 0 {
		return exec.AsValue(errors.New("range: step cannot be 0"))
	}
	out := []any{}
	for i := start; (step > 0 && i < stop) || (step < 0 && i > stop); i += step {
		if len(out) == maxRange {
			return exec.AsValue(fmt.Errorf("range: more than %d items", maxRange))
		}
		out = append(out, i)
	}
	return exec.AsValue(out)
}

// maxMacroDepth bounds nested macro calls (Python's own recursion limit
// bounds Jinja's).
const maxMacroDepth = 64

// maxChatTemplate bounds a chat template's size (real ones are a few
// kilobytes), and maxTemplateNesting the nesting of its brackets: gonja's
// parser recurses on both.
const (
	maxChatTemplate    = 256 << 10
	maxTemplateNesting = 128
)

// depthKey names the render's macro depth counter in its context.
const depthKey = "__hoist_macro_depth"

// chatControlStructures are gonja's control structures but those that
// read other templates, with macros counting their depth.
func chatControlStructures() *exec.ControlStructureSet {
	m := map[string]parser.ControlStructureParser{}
	for _, name := range []string{"autoescape", "block", "filter", "for", "if", "macro", "raw", "set", "with", "do", "break", "continue", "trans", "call"} {
		if p, ok := builtins.ControlStructures.Get(name); ok {
			m[name] = p
		}
	}
	if p, ok := m["macro"]; ok {
		m["macro"] = func(pp *parser.Parser, args *parser.Parser) (nodes.ControlStructure, error) {
			cs, err := p(pp, args)
			if err != nil {
				return nil, err
			}
			mcs, ok := cs.(*controlStructures.MacroControlStructure)
			if !ok {
				return cs, nil
			}
			return &boundedMacro{mcs}, nil
		}
	}
	return exec.NewControlStructureSet(m)
}

// boundedMacro defines a macro whose calls count against the render's
// macro depth.
type boundedMacro struct {
	*controlStructures.MacroControlStructure
}

func (b *boundedMacro) Execute(r *exec.Renderer, _ *nodes.ControlStructureBlock) error {
	fn, err := exec.MacroNodeToFunc(b.Macro, r)
	if err != nil {
		return fmt.Errorf("macro %s: %w", b.Name, err)
	}
	v, _ := r.Environment.Context.Get(depthKey)
	depth, _ := v.(*atomic.Int32)
	r.Environment.Context.Set(b.Name, exec.Macro(func(params *exec.VarArgs) *exec.Value {
		if depth != nil {
			if depth.Add(1) > maxMacroDepth {
				depth.Add(-1)
				return exec.AsValue(fmt.Errorf("macro %s: calls nested more than %d deep", b.Name, maxMacroDepth))
			}
			defer depth.Add(-1)
		}
		return fn(params)
	}))
	return nil
}

// compileChatTemplate parses a chat template.
func compileChatTemplate(src string) (*chatTemplate, error) {
	if len(src) > maxChatTemplate {
		return nil, fmt.Errorf("compile chat template: %d bytes, more than %d", len(src), maxChatTemplate)
	}
	depth := 0
	for _, c := range src {
		switch c {
		case '(', '[', '{':
			if depth++; depth > maxTemplateNesting {
				return nil, fmt.Errorf("compile chat template: brackets nested more than %d deep", maxTemplateNesting)
			}
		case ')', ']', '}':
			depth = max(depth-1, 0)
		}
	}
	cfg := config.New()
	cfg.TrimBlocks, cfg.LeftStripBlocks = true, true
	const root = "/chat_template"
	loader, err := loaders.NewMemoryLoader(map[string]string{root: src})
	if err != nil {
		return nil, fmt.Errorf("compile chat template: %w", err)
	}
	tpl, err := exec.NewTemplate(root, cfg, loader, chatTemplateEnv)
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
		depthKey:                new(atomic.Int32),
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
