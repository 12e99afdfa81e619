package web

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

// fakeTGI is a Text Generation Inference replica: /generate answers with
// details, /generate_stream sends two tokens and waits for next before the
// last event. It records the payloads it got.
type fakeTGI struct {
	payloads chan tgiPayload
	next     chan struct{}
}

func newFakeTGI(t *testing.T) (*fakeTGI, Replica) {
	t.Helper()
	f := &fakeTGI{payloads: make(chan tgiPayload, 8), next: make(chan struct{})}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var p tgiPayload
		if err := json.NewDecoder(r.Body).Decode(&p); err != nil {
			http.Error(w, `{"error": "bad json"}`, http.StatusUnprocessableEntity)
			return
		}
		f.payloads <- p
		switch r.URL.Path {
		case "/generate":
			if strings.Contains(p.Inputs, "please fail") {
				http.Error(w, `{"error": "Input validation error"}`, http.StatusUnprocessableEntity)
				return
			}
			fmt.Fprint(w, `{"generated_text": "Hello there.</s>", "details": {"finish_reason": "eos_token",
				"generated_tokens": 4, "seed": 42, "prefill": [{"id": 1}, {"id": 2}, {"id": 3}],
				"best_of_sequences": [{"generated_text": "Hi!", "finish_reason": "length", "generated_tokens": 2}]}}`)
		case "/generate_stream":
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "data:{\"token\": {\"id\": 5, \"text\": \"Hel\", \"special\": false}, \"details\": null}\n\n")
			w.(http.Flusher).Flush()
			select {
			case <-f.next:
			case <-r.Context().Done():
				return
			case <-time.After(10 * time.Second):
				return
			}
			fmt.Fprint(w, "data:{\"token\": {\"id\": 6, \"text\": \"lo\", \"special\": false}, \"details\": null}\n\n")
			fmt.Fprint(w, "data:{\"token\": {\"id\": 2, \"text\": \"</s>\", \"special\": true}, \"generated_text\": \"Hello\", \"details\": {\"finish_reason\": \"eos_token\", \"generated_tokens\": 3}}\n\n")
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(ts.Close)
	return f, Replica{JobID: "tgi-1", Addr: ts.Listener.Addr().String(), Transport: ts.Client().Transport}
}

func tgiFixture(t *testing.T) (*fixture, *fakeTGI) {
	t.Helper()
	tpl, err := os.ReadFile("testdata/chat_templates/chatml.jinja")
	if err != nil {
		t.Fatal(err)
	}
	tgi, rep := newFakeTGI(t)
	f, _ := proxyFixture(t, Service{Project: "main", Run: "tgi", MinReplicas: 1, Replicas: []Replica{rep},
		Model: &ServiceModel{Name: "tgi-llm", Format: "tgi", ChatTemplate: string(tpl), EOSToken: "</s>"}})
	return f, tgi
}

func TestProxy_tgiModelAnswersAChatCompletion(t *testing.T) {
	f, tgi := tgiFixture(t)
	chat := `{"model": "tgi-llm", "max_tokens": 20, "temperature": 0.5, "top_p": 0.9, "seed": 7, "n": 2, "stop": "###",
		"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": [{"type": "text", "text": "Hi"}]}]}`
	resp := f.do(t, "POST", "/proxy/models/main/chat/completions", userTok, strings.NewReader(chat))
	body := readBody(t, resp)
	if resp.StatusCode != 200 {
		t.Fatalf("chat completion: %d %q", resp.StatusCode, body)
	}
	p := <-tgi.payloads
	temp, topP, seed, maxTok := 0.5, 0.9, int64(7), 20
	want := tgiPayload{
		Inputs: "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
		Parameters: tgiParameters{DoSample: true, MaxNewTokens: &maxTok, Stop: []string{"###", "</s>"}, Seed: &seed,
			Temperature: &temp, TopP: &topP, BestOf: 2, Details: true, DecoderInputDetails: true},
	}
	if !reflect.DeepEqual(p, want) {
		t.Fatalf("TGI got %+v\nwant %+v", p, want)
	}
	var got chatCompletion
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatal(err)
	}
	wantChoices := []chatChoice{
		{Index: 0, FinishReason: "stop", Message: chatMessage{Role: "assistant", Content: "Hello there."}},
		{Index: 1, FinishReason: "length", Message: chatMessage{Role: "assistant", Content: "Hi!"}},
	}
	if got.Object != "chat.completion" || got.Model != "tgi-llm" || len(got.ID) != 32 || got.SystemFingerprint != "fp_42" ||
		!reflect.DeepEqual(got.Choices, wantChoices) || got.Usage != (chatUsage{PromptTokens: 3, CompletionTokens: 6, TotalTokens: 9}) {
		t.Fatalf("chat completion: %+v", got)
	}

	t.Run("defaults are dstack's", func(t *testing.T) {
		resp := f.do(t, "POST", "/proxy/models/main/v1/chat/completions", userTok,
			strings.NewReader(`{"model": "tgi-llm", "messages": [{"role": "user", "content": "Hi"}]}`))
		if body := readBody(t, resp); resp.StatusCode != 200 {
			t.Fatalf("%d %q", resp.StatusCode, body)
		}
		p := <-tgi.payloads
		one := 1.0
		want := tgiParameters{DoSample: true, Stop: []string{"</s>"}, Temperature: &one, BestOf: 1, Details: true, DecoderInputDetails: true}
		if !reflect.DeepEqual(p.Parameters, want) {
			t.Fatalf("parameters %+v, want %+v", p.Parameters, want)
		}
	})
	for _, tc := range []struct {
		name, path, body string
		code             int
	}{
		{name: "TGI's error goes back with its status", path: "chat/completions",
			body: `{"model": "tgi-llm", "messages": [{"role": "user", "content": "please fail"}]}`, code: http.StatusUnprocessableEntity},
		{name: "completions are not served for tgi", path: "completions",
			body: `{"model": "tgi-llm", "prompt": "x"}`, code: http.StatusNotFound},
		{name: "a message without a role is 400", path: "chat/completions",
			body: `{"model": "tgi-llm", "messages": [{"content": "x"}]}`, code: http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := tc.body
			resp := f.do(t, "POST", "/proxy/models/main/"+tc.path, userTok, strings.NewReader(body))
			if b := readBody(t, resp); resp.StatusCode != tc.code || (tc.code == http.StatusUnprocessableEntity && !strings.Contains(b, "Input validation error")) {
				t.Fatalf("got %d %q, want %d", resp.StatusCode, b, tc.code)
			}
		})
	}
}

func TestProxy_tgiModelStreamsAChatCompletion(t *testing.T) {
	f, tgi := tgiFixture(t)
	chat := `{"model": "tgi-llm", "stream": true, "messages": [{"role": "user", "content": "Hi"}]}`
	resp := f.do(t, "POST", "/proxy/models/main/chat/completions", userTok, strings.NewReader(chat))
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("stream: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if p := <-tgi.payloads; p.Parameters.DecoderInputDetails {
		t.Fatalf("a stream asked for decoder input details: %+v", p.Parameters)
	}
	br := bufio.NewReader(resp.Body)
	event := func() string {
		t.Helper()
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("reading the stream: %v", err)
		}
		if blank, _ := br.ReadString('\n'); blank != "\n" {
			t.Fatalf("event %q not followed by a blank line: %q", line, blank)
		}
		return strings.TrimSuffix(line, "\n")
	}
	chunk := func(line string) chatChunk {
		t.Helper()
		var c chatChunk
		if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &c); err != nil {
			t.Fatalf("chunk %q: %v", line, err)
		}
		return c
	}
	// The first token arrives while TGI still holds the rest back.
	first := chunk(event())
	if first.Object != "chat.completion.chunk" || first.Model != "tgi-llm" || first.Choices[0].Delta["content"] != "Hel" ||
		first.Choices[0].Delta["role"] != "assistant" || first.Choices[0].FinishReason != nil {
		t.Fatalf("first chunk %+v", first)
	}
	close(tgi.next)
	second, last := chunk(event()), chunk(event())
	if second.Choices[0].Delta["content"] != "lo" || second.ID != first.ID {
		t.Fatalf("second chunk %+v", second)
	}
	if r := last.Choices[0].FinishReason; r == nil || *r != "stop" || len(last.Choices[0].Delta) != 0 {
		t.Fatalf("last chunk %+v", last)
	}
	if done := event(); done != "data: [DONE]" {
		t.Fatalf("stream ended with %q, want data: [DONE]", done)
	}
	if rest, _ := io.ReadAll(br); len(rest) != 0 {
		t.Fatalf("after [DONE]: %q", rest)
	}
}

func TestStreamChunk_keepsTheLastTokenAtTheLengthLimit(t *testing.T) {
	c, err := streamChunk([]byte(`{"token": {"text": " end", "special": false}, "details": {"finish_reason": "length"}}`), "id", 1, "m")
	if err != nil || c.Choices[0].Delta["content"] != " end" || *c.Choices[0].FinishReason != "length" {
		t.Fatalf("got %+v %v", c, err)
	}
	if _, err := streamChunk([]byte(`{"error": "out of memory"}`), "id", 1, "m"); err == nil || !strings.Contains(err.Error(), "out of memory") {
		t.Fatalf("an error event: %v", err)
	}
}
