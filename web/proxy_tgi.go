package web

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/labstack/echo/v5"
)

// The chat completions of a `format: tgi` model, as dstack's model proxy
// serves them (dstack
// src/dstack/_internal/proxy/lib/services/model_proxy/clients/tgi.py): the
// OpenAI request's messages are rendered through the model's chat template
// into a prompt for Text Generation Inference's /generate or
// /generate_stream (https://huggingface.github.io/text-generation-inference/),
// and its answer goes back as an OpenAI chat completion or its chunks.

// tgiChatRequest is the part of an OpenAI chat completion request dstack
// maps to TGI's parameters; defaults are dstack's ChatCompletionsRequest's.
type tgiChatRequest struct {
	Model       string            `json:"model"`
	Messages    []json.RawMessage `json:"messages"`
	MaxTokens   *int              `json:"max_tokens"`
	N           *int              `json:"n"`
	Seed        *int64            `json:"seed"`
	Stop        json.RawMessage   `json:"stop"`
	Stream      bool              `json:"stream"`
	Temperature *float64          `json:"temperature"`
	TopP        *float64          `json:"top_p"`
}

// tgiPayload is the body of TGI's /generate and /generate_stream.
type tgiPayload struct {
	Inputs     string        `json:"inputs"`
	Parameters tgiParameters `json:"parameters"`
}

type tgiParameters struct {
	DoSample            bool     `json:"do_sample"`
	MaxNewTokens        *int     `json:"max_new_tokens"`
	Stop                []string `json:"stop"`
	Seed                *int64   `json:"seed"`
	Temperature         *float64 `json:"temperature"`
	TopP                *float64 `json:"top_p,omitempty"`
	BestOf              int      `json:"best_of"`
	Details             bool     `json:"details"`
	DecoderInputDetails bool     `json:"decoder_input_details"`
}

// tgiGenerated is TGI's answer to /generate with details.
type tgiGenerated struct {
	GeneratedText string `json:"generated_text"`
	Details       *struct {
		FinishReason    string            `json:"finish_reason"`
		GeneratedTokens int               `json:"generated_tokens"`
		Seed            *uint64           `json:"seed"`
		Prefill         []json.RawMessage `json:"prefill"`
		BestOfSequences []struct {
			GeneratedText   string `json:"generated_text"`
			FinishReason    string `json:"finish_reason"`
			GeneratedTokens int    `json:"generated_tokens"`
		} `json:"best_of_sequences"`
	} `json:"details"`
}

// tgiStreamEvent is one server-sent event of /generate_stream.
type tgiStreamEvent struct {
	Token *struct {
		Text    string `json:"text"`
		Special bool   `json:"special"`
	} `json:"token"`
	Details *struct {
		FinishReason string `json:"finish_reason"`
	} `json:"details"`
	Error *string `json:"error"`
}

// chatMessage is a message of an OpenAI chat completion.
type chatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// chatCompletion is OpenAI's chat completion object.
type chatCompletion struct {
	ID                string       `json:"id"`
	Object            string       `json:"object"`
	Created           int64        `json:"created"`
	Model             string       `json:"model"`
	SystemFingerprint string       `json:"system_fingerprint"`
	Choices           []chatChoice `json:"choices"`
	Usage             chatUsage    `json:"usage"`
}

type chatChoice struct {
	Index        int         `json:"index"`
	Message      chatMessage `json:"message"`
	FinishReason string      `json:"finish_reason"`
}

type chatUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// chatChunk is OpenAI's chat completion chunk object, one per event of a
// streamed completion.
type chatChunk struct {
	ID                string            `json:"id"`
	Object            string            `json:"object"`
	Created           int64             `json:"created"`
	Model             string            `json:"model"`
	SystemFingerprint string            `json:"system_fingerprint"`
	Choices           []chatChunkChoice `json:"choices"`
}

type chatChunkChoice struct {
	Index        int               `json:"index"`
	Delta        map[string]string `json:"delta"`
	Logprobs     any               `json:"logprobs"`
	FinishReason *string           `json:"finish_reason"`
}

// maxTGIError bounds the error body of TGI relayed to the client.
const maxTGIError = 64 << 10

// tgiChat serves a chat completion of a tgi-format model.
func (p *serviceProxy) tgiChat(c *echo.Context, svc Service, body []byte) error {
	m := svc.Model
	if m.ChatTemplate == "" {
		return echo.NewHTTPError(http.StatusServiceUnavailable, "model "+m.Name+": its chat template is not known yet")
	}
	var req tgiChatRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return echo.NewHTTPError(http.StatusBadRequest, "the body is not a chat completion request: "+err.Error())
	}
	payload, err := p.tgiPayload(m, req)
	if err != nil {
		return err
	}
	b, err := json.Marshal(payload)
	if err != nil {
		return fmt.Errorf("tgi payload: %w", err)
	}
	ctx := c.Request().Context()
	// A generation, or a wait for a replica of a run scaled to zero, is
	// not cut at the server's read and write timeouts (as forward).
	renew := p.s.streamDeadlines(c.Response())
	rep, err := p.replica(ctx, svc)
	renew()
	if err != nil {
		return err
	}
	path := "/generate"
	if req.Stream {
		path = "/generate_stream"
	}
	resp, err := p.tgiPost(ctx, svc, rep, path, b)
	renew() // the answer (or error) is written after a generation's time
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if !req.Stream {
		return p.tgiAnswer(c, req, payload, resp, renew)
	}
	return p.tgiStream(c, req, resp, renew)
}

// tgiPayload renders the request's messages and maps its parameters as
// dstack's get_payload does.
func (p *serviceProxy) tgiPayload(m *ServiceModel, req tgiChatRequest) (tgiPayload, error) {
	msgs := make([]map[string]any, 0, len(req.Messages))
	for i, raw := range req.Messages {
		msg, err := templateMessage(raw)
		if err != nil {
			return tgiPayload{}, echo.NewHTTPError(http.StatusBadRequest, fmt.Sprintf("messages[%d]: %v", i, err))
		}
		msgs = append(msgs, msg)
	}
	tpl, err := p.templates.get(m.ChatTemplate)
	if err != nil {
		return tgiPayload{}, echo.NewHTTPError(http.StatusInternalServerError, "model "+m.Name+": failed to compile chat template: "+err.Error())
	}
	inputs, err := tpl.render(msgs, m.EOSToken)
	if err != nil {
		return tgiPayload{}, echo.NewHTTPError(http.StatusBadRequest, "model "+m.Name+": failed to render chat template: "+err.Error())
	}
	var stop []string
	if len(req.Stop) > 0 && string(req.Stop) != "null" {
		var one string
		if json.Unmarshal(req.Stop, &one) == nil {
			stop = []string{one}
		} else if err := json.Unmarshal(req.Stop, &stop); err != nil {
			return tgiPayload{}, echo.NewHTTPError(http.StatusBadRequest, "`stop` must be a string or a list of strings")
		}
	}
	if m.EOSToken != "" && !slices.Contains(stop, m.EOSToken) {
		stop = append(stop, m.EOSToken)
	}
	if stop == nil {
		stop = []string{}
	}
	params := tgiParameters{
		DoSample: true, MaxNewTokens: req.MaxTokens, Stop: stop, Seed: req.Seed,
		Temperature: req.Temperature, BestOf: 1, Details: true, DecoderInputDetails: !req.Stream,
	}
	if req.Temperature == nil {
		one := 1.0
		params.Temperature = &one
	}
	if req.N != nil {
		params.BestOf = *req.N
	}
	if req.TopP != nil && *req.TopP < 1 {
		params.TopP = req.TopP
	}
	return tgiPayload{Inputs: inputs, Parameters: params}, nil
}

// templateMessage is a request's message as a chat template sees it: its
// fields, with content as text (the text parts of a list joined).
func templateMessage(raw json.RawMessage) (map[string]any, error) {
	var msg map[string]any
	if err := json.Unmarshal(raw, &msg); err != nil || msg == nil {
		return nil, errors.New("a message must be an object")
	}
	if _, ok := msg["role"].(string); !ok {
		return nil, errors.New("a message needs a `role`")
	}
	switch ct := msg["content"].(type) {
	case string:
	case nil:
		msg["content"] = ""
	case []any:
		var sb strings.Builder
		for _, part := range ct {
			pm, _ := part.(map[string]any)
			if pm["type"] != "text" {
				return nil, errors.New("only text content is supported by a tgi model")
			}
			s, _ := pm["text"].(string)
			sb.WriteString(s)
		}
		msg["content"] = sb.String()
	default:
		return nil, errors.New("`content` must be a string or a list of text parts")
	}
	return msg, nil
}

// tgiPost sends the payload to the replica; an answer other than 200
// becomes the client's error with TGI's status and body, as dstack
// propagates it.
func (p *serviceProxy) tgiPost(ctx context.Context, svc Service, rep Replica, path string, body []byte) (*http.Response, error) {
	out, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+rep.Addr+path, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("tgi request: %w", err)
	}
	out.Header.Set("Content-Type", "application/json")
	resp, err := transportOf(rep).RoundTrip(out)
	if err != nil {
		p.forget(svc.Project, svc.Run)
		if ctx.Err() == nil {
			p.s.log.Warn("service_proxy_failed", "project", svc.Project, "run", svc.Run, "job_id", rep.JobID, "error", err)
		}
		return nil, echo.NewHTTPError(http.StatusBadGateway, "error requesting model: "+err.Error())
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, maxTGIError))
		return nil, echo.NewHTTPError(resp.StatusCode, strings.ToValidUTF8(string(msg), "\uFFFD"))
	}
	return resp, nil
}

// tgiAnswer converts /generate's answer into a chat completion: the best
// sequence and best_of's others as choices, stop sequences trimmed, usage
// counted as dstack counts it.
func (p *serviceProxy) tgiAnswer(c *echo.Context, req tgiChatRequest, payload tgiPayload, resp *http.Response, renew func()) error {
	var g tgiGenerated
	if err := json.NewDecoder(resp.Body).Decode(&g); err != nil || g.Details == nil {
		return echo.NewHTTPError(http.StatusBadGateway, "the model's answer is not TGI's /generate answer with details")
	}
	d := g.Details
	stop := payload.Parameters.Stop
	reason, err := finishReason(d.FinishReason)
	if err != nil {
		return err
	}
	out := chatCompletion{
		ID: completionID(), Object: "chat.completion", Created: p.s.now().Unix(), Model: req.Model,
		Choices: []chatChoice{{Index: 0, FinishReason: reason,
			Message: chatMessage{Role: "assistant", Content: trimStop(g.GeneratedText, stop)}}},
	}
	if d.Seed != nil {
		out.SystemFingerprint = "fp_" + strconv.FormatUint(*d.Seed, 10)
	}
	completion := d.GeneratedTokens
	for i, s := range d.BestOfSequences {
		reason, err := finishReason(s.FinishReason)
		if err != nil {
			return err
		}
		out.Choices = append(out.Choices, chatChoice{Index: i + 1, FinishReason: reason,
			Message: chatMessage{Role: "assistant", Content: trimStop(s.GeneratedText, stop)}})
		completion += s.GeneratedTokens
	}
	out.Usage = chatUsage{PromptTokens: len(d.Prefill), CompletionTokens: completion, TotalTokens: len(d.Prefill) + completion}
	renew()
	return c.JSON(http.StatusOK, out)
}

// tgiStream converts /generate_stream's events into chat completion chunks
// sent as they arrive, then `data: [DONE]`. An error once the answer has
// started goes as an SSE comment, as dstack sends it, and ends the stream
// without [DONE].
func (p *serviceProxy) tgiStream(c *echo.Context, req tgiChatRequest, resp *http.Response, renew func()) error {
	w := c.Response()
	rc := http.NewResponseController(w)
	id, created := completionID(), p.s.now().Unix()
	br := bufio.NewReader(resp.Body)
	started := false
	start := func() {
		if started {
			return
		}
		started = true
		h := w.Header()
		h.Set(echo.HeaderContentType, "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Accel-Buffering", "no")
		w.WriteHeader(http.StatusOK)
	}
	send := func(b []byte) error {
		start()
		renew()
		if _, err := w.Write(b); err != nil {
			return err
		}
		return rc.Flush()
	}
	for {
		line, rerr := br.ReadBytes('\n')
		if data, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r\n"), []byte("data:")); ok {
			chunk, err := streamChunk(data, id, created, req.Model)
			if err != nil {
				if !started {
					// Nothing sent yet: the client gets the error as an
					// answer (dstack pre-fetches the first chunk for this).
					return echo.NewHTTPError(http.StatusBadGateway, err.Error())
				}
				return send([]byte(": " + strconv.Quote(err.Error()) + "\n\n"))
			}
			b, err := json.Marshal(chunk)
			if err != nil {
				return fmt.Errorf("chat chunk: %w", err)
			}
			if err := send(append(append([]byte("data: "), b...), '\n', '\n')); err != nil {
				return nil // the client left
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			if !started {
				return echo.NewHTTPError(http.StatusBadGateway, "error reading the model's stream: "+rerr.Error())
			}
			if c.Request().Context().Err() == nil {
				_ = send([]byte(": " + strconv.Quote("error reading the model's stream: "+rerr.Error()) + "\n\n"))
			}
			return nil
		}
	}
	_ = send([]byte("data: [DONE]\n\n"))
	return nil
}

// streamChunk converts one /generate_stream event: a token is a delta, the
// last event (with details) the finish reason. dstack drops the last
// event's token; hoist keeps it when generation stopped at the length
// limit, where it is text of the answer (at a stop sequence or the end of
// sequence token it is not).
func streamChunk(data []byte, id string, created int64, model string) (chatChunk, error) {
	var ev tgiStreamEvent
	if err := json.Unmarshal(data, &ev); err != nil {
		return chatChunk{}, fmt.Errorf("the model's stream event is not JSON: %w", err)
	}
	if ev.Error != nil {
		return chatChunk{}, errors.New(*ev.Error)
	}
	ch := chatChunkChoice{Index: 0, Delta: map[string]string{}}
	switch {
	case ev.Details != nil:
		reason, err := finishReason(ev.Details.FinishReason)
		if err != nil {
			return chatChunk{}, err
		}
		ch.FinishReason = &reason
		if reason == "length" && ev.Token != nil && !ev.Token.Special {
			ch.Delta = map[string]string{"role": "assistant", "content": ev.Token.Text}
		}
	case ev.Token != nil:
		ch.Delta = map[string]string{"role": "assistant", "content": ev.Token.Text}
	}
	return chatChunk{ID: id, Object: "chat.completion.chunk", Created: created, Model: model, Choices: []chatChunkChoice{ch}}, nil
}

// finishReason maps TGI's finish reason to OpenAI's.
func finishReason(reason string) (string, error) {
	switch reason {
	case "stop_sequence", "eos_token":
		return "stop", nil
	case "length":
		return "length", nil
	}
	return "", echo.NewHTTPError(http.StatusBadGateway, "unknown finish reason from the model: "+reason)
}

// trimStop removes the first of stop that text ends with.
func trimStop(text string, stop []string) string {
	for _, s := range stop {
		if s != "" && strings.HasSuffix(text, s) {
			return strings.TrimSuffix(text, s)
		}
	}
	return text
}

// completionID is a new completion's id: 32 random hex digits, as
// dstack's uuid4().hex.
func completionID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
