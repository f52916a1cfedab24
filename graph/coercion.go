package graph

import (
	"context"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
)

// exactEnums refuses an enum variable that names a value in another case
// ("none" for NONE). gqlparser's check of variables compares enum values
// ignoring case, while the spec's input coercion takes only a value's name
// as written, and gqlgen's generated unmarshaler then fails without a
// code (an internal error). It runs after gqlparser's check, on the
// variables as coerced, so the refusal is the same request error as an
// unknown value's: GRAPHQL_VALIDATION_FAILED, before anything runs.
//
// The built-in scalars are strict in their unmarshalers (graph/model's
// scalar.go), which gqlparser's check leaves the rest to.
type exactEnums struct {
	schema *ast.Schema
}

var _ interface {
	graphql.HandlerExtension
	graphql.OperationContextMutator
} = exactEnums{}

func (exactEnums) ExtensionName() string { return "ExactEnums" }

func (exactEnums) Validate(graphql.ExecutableSchema) error { return nil }

func (e exactEnums) MutateOperationContext(_ context.Context, rc *graphql.OperationContext) *gqlerror.Error {
	for _, def := range rc.Operation.VariableDefinitions {
		path := ast.Path{ast.PathName("variable"), ast.PathName(def.Variable)}
		if err := e.check(def.Type, rc.Variables[def.Variable], path); err != nil {
			errcode.Set(err, errcode.ValidationFailed)
			return err
		}
	}
	return nil
}

// check walks the value v, of type t as gqlparser coerced it.
func (e exactEnums) check(t *ast.Type, v any, path ast.Path) *gqlerror.Error {
	if v == nil {
		return nil
	}
	if t.Elem != nil {
		list, ok := v.([]any)
		if !ok {
			return e.check(t.Elem, v, path) // one value for a list of them
		}
		for i, item := range list {
			if err := e.check(t.Elem, item, append(path, ast.PathIndex(i))); err != nil {
				return err
			}
		}
		return nil
	}
	def := e.schema.Types[t.NamedType]
	if def == nil {
		return nil
	}
	switch def.Kind {
	case ast.Enum:
		if s, ok := v.(string); ok && def.EnumValues.ForName(s) == nil {
			return gqlerror.ErrorPathf(path, "%s is not a valid %s", s, def.Name)
		}
	case ast.InputObject:
		fields, _ := v.(map[string]any)
		for _, f := range def.Fields {
			if err := e.check(f.Type, fields[f.Name], append(path, ast.PathName(f.Name))); err != nil {
				return err
			}
		}
	}
	return nil
}
