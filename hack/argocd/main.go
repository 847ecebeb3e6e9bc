// Command argocd-health runs an Argo CD resource health script the way Argo CD's application
// controller does: in gopher-lua (the Lua 5.1 VM Argo CD embeds), with only the package, base and
// table libraries open (no string, math, io or os), the resource bound to the global `obj`, a
// one-second deadline, and the returned table's status checked against Argo CD's health codes.
//
// Usage: argocd-health SCRIPT < objects.json   (a JSON array of resources)
// Prints one JSON line per resource: {"status": ..., "message": ...} or {"error": ...}.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	lua "github.com/yuin/gopher-lua"
)

// The health codes Argo CD accepts from a script; anything else becomes Unknown there.
var validStatus = map[string]bool{
	"Healthy": true, "Progressing": true, "Degraded": true, "Suspended": true, "Missing": true, "Unknown": true,
}

type verdict struct {
	Status  string `json:"status,omitempty"`
	Message string `json:"message,omitempty"`
	Error   string `json:"error,omitempty"`
}

func toLua(state *lua.LState, value any) lua.LValue {
	switch v := value.(type) {
	case bool:
		return lua.LBool(v)
	case float64:
		return lua.LNumber(v)
	case string:
		return lua.LString(v)
	case []any:
		array := state.CreateTable(len(v), 0)
		for _, item := range v {
			array.Append(toLua(state, item))
		}
		return array
	case map[string]any:
		table := state.CreateTable(0, len(v))
		for key, item := range v {
			table.RawSetH(lua.LString(key), toLua(state, item))
		}
		return table
	}
	return lua.LNil
}

func field(table *lua.LTable, name string) (string, error) {
	value := table.RawGetString(name)
	switch value.Type() {
	case lua.LTNil:
		return "", nil
	case lua.LTString:
		return value.String(), nil
	}
	return "", fmt.Errorf("%s is a %s, not a string", name, value.Type())
}

func judge(script string, object map[string]any) verdict {
	state := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer state.Close()
	for name, open := range map[string]lua.LGFunction{
		lua.LoadLibName: lua.OpenPackage,
		lua.BaseLibName: lua.OpenBase,
		lua.TabLibName:  lua.OpenTable,
	} {
		if err := state.CallByParam(lua.P{Fn: state.NewFunction(open), Protect: true}, lua.LString(name)); err != nil {
			return verdict{Error: err.Error()}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	state.SetContext(ctx)
	state.SetGlobal("obj", toLua(state, object))
	if err := state.DoString(script); err != nil {
		return verdict{Error: err.Error()}
	}
	returned, ok := state.Get(-1).(*lua.LTable)
	if !ok {
		return verdict{Error: fmt.Sprintf("expected a table from the script, got %s", state.Get(-1).Type())}
	}
	status, err := field(returned, "status")
	if err != nil {
		return verdict{Error: err.Error()}
	}
	message, err := field(returned, "message")
	if err != nil {
		return verdict{Error: err.Error()}
	}
	if !validStatus[status] {
		return verdict{Error: fmt.Sprintf("invalid health status %q", status)}
	}
	return verdict{Status: status, Message: message}
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: argocd-health SCRIPT < objects.json")
		os.Exit(2)
	}
	script, err := os.ReadFile(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var objects []map[string]any
	if err := json.NewDecoder(os.Stdin).Decode(&objects); err != nil {
		fmt.Fprintln(os.Stderr, "reading objects:", err)
		os.Exit(2)
	}
	out := json.NewEncoder(os.Stdout)
	for _, object := range objects {
		if err := out.Encode(judge(string(script), object)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
}
