package web

import (
	"os"
	"strings"
	"testing"
)

func TestChatTemplate_rendersHuggingFaceTemplates(t *testing.T) {
	read := func(name string) string {
		b, err := os.ReadFile("testdata/chat_templates/" + name)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	msg := func(role, content string) map[string]any { return map[string]any{"role": role, "content": content} }
	for _, tc := range []struct {
		name, file string
		messages   []map[string]any
		want       string
	}{
		{name: "llama-2 puts the system prompt in the first instruction", file: "llama2.jinja",
			messages: []map[string]any{msg("system", "Be brief."), msg("user", " Hi "), msg("assistant", "Hello."), msg("user", "Bye")},
			want:     "[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\n Hi [/INST] Hello. </s>[INST] Bye [/INST]"},
		{name: "llama-2 without a system prompt", file: "llama2.jinja",
			messages: []map[string]any{msg("user", "Hi")},
			want:     "[INST] Hi [/INST]"},
		{name: "chatml adds the generation prompt", file: "chatml.jinja",
			messages: []map[string]any{msg("system", "Be brief."), msg("user", "Hi")},
			want:     "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"},
		{name: "block lines leave no blank lines (trim_blocks, lstrip_blocks)", file: "zephyr.jinja",
			messages: []map[string]any{msg("system", "Be brief."), msg("user", "Hi")},
			want:     "<|system|>\nBe brief.</s>\n<|user|>\nHi</s>\n<|assistant|>\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tpl, err := compileChatTemplate(read(tc.file))
			if err != nil {
				t.Fatal(err)
			}
			got, err := tpl.render(tc.messages, "</s>")
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("got\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
}

func TestChatTemplate_raiseExceptionFailsTheRender(t *testing.T) {
	b, err := os.ReadFile("testdata/chat_templates/llama2.jinja")
	if err != nil {
		t.Fatal(err)
	}
	tpl, err := compileChatTemplate(string(b))
	if err != nil {
		t.Fatal(err)
	}
	_, err = tpl.render([]map[string]any{{"role": "user", "content": "a"}, {"role": "user", "content": "b"}}, "</s>")
	if err == nil || !strings.Contains(err.Error(), "Conversation roles must alternate") {
		t.Fatalf("got %v, want the template's exception", err)
	}
}

func TestChatTemplate_malformedTemplateIsRefused(t *testing.T) {
	if _, err := compileChatTemplate("{% for m in messages %}{{ m.content }}"); err == nil {
		t.Fatal("an unclosed for compiled")
	}
}

func TestChatTemplate_refusesWhatCouldHarmTheServer(t *testing.T) {
	for _, tc := range []struct {
		name, src, want string
		atRender        bool
	}{
		{name: "a recursive macro stops at the depth limit", src: "{% macro f(n) %}x{{ f(n) }}{% endmacro %}{{ f(1) }}",
			want: "nested more than 64 deep", atRender: true},
		{name: "mutually recursive macros stop too", src: "{% macro f() %}{{ g() }}{% endmacro %}{% macro g() %}{{ f() }}{% endmacro %}{{ f() }}",
			want: "nested more than 64 deep", atRender: true},
		{name: "range is bounded", src: "{% for i in range(1000000000) %}x{% endfor %}", want: "more than 100000 items", atRender: true},
		{name: "a template includes no file", src: `{% include "/etc/hostname" %}`, want: "include"},
		{name: "nor imports one", src: `{% import "/etc/hostname" as x %}`, want: "import"},
		{name: "nor extends one", src: `{% extends "/chat_template" %}`, want: "extends"},
		{name: "deeply nested brackets", src: "{{ " + strings.Repeat("(", 200) + "1" + strings.Repeat(")", 200) + " }}", want: "nested more than 128"},
		{name: "a huge template", src: strings.Repeat("x", 300<<10), want: "more than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tpl, err := compileChatTemplate(tc.src)
			if tc.atRender {
				if err != nil {
					t.Fatal(err)
				}
				_, err = tpl.render([]map[string]any{{"role": "user", "content": "hi"}}, "</s>")
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
	for src, want := range map[string]string{
		"{{ range(3) | list }}": "[0, 1, 2]",
		"{% for i in range(1, 10, 3) %}{{ i }}{% if loop.last %}.{% endif %}{% endfor %}": "147.",
		"{% for i in range(3, 0, -1) %}{{ i }}{% endfor %}":                               "321",
	} {
		tpl, err := compileChatTemplate(src)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := tpl.render(nil, ""); err != nil || got != want {
			t.Errorf("%s: %q %v, want %q", src, got, err, want)
		}
	}
	// A bounded recursion, as templates walking a JSON schema do, works.
	tpl, err := compileChatTemplate("{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(5) }}")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := tpl.render(nil, ""); err != nil || got != "54321" {
		t.Fatalf("bounded recursion: %q %v", got, err)
	}
}
