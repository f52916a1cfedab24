package graph

import (
	"context"
	"math"
	"strings"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"github.com/vektah/gqlparser/v2/parser"
	"github.com/vektah/gqlparser/v2/validator/core"
	"github.com/vektah/gqlparser/v2/validator/rules"
)

// Query limits.
//
// A GraphQL document can ask for far more than its size: n named
// fragments, each spreading the one before it twice, are worth 2^n fields.
// gqlgen's complexity extension expands every spread again (exponential
// time), and gqlparser's validation compares every pair of fields that
// share a response name (quadratic time, and as many errors). So the
// limits are checked here, on the parsed document, before gqlparser
// validates it and before anything runs, by one walk that measures each
// fragment once: its time is linear in the document's size whatever the
// document asks for. Within the limits, validation and execution are
// cheap.

// errComplexityLimit is the code gqlgen's complexity extension gives its
// refusals; ours keep it (and its HTTP status, 200).
const errComplexityLimit = "COMPLEXITY_LIMIT_EXCEEDED"

// maxValidationErrors bounds the errors one document gets back, as
// graphql-js does: a document can break a rule many times over (two
// hundred conflicting fields make twenty thousand conflicts).
const maxValidationErrors = 100

// limits are what a document may ask for. check applies them; both the
// gqlgen server (documentLimits) and the purchase fast path call it, so
// the two cannot disagree.
type limits struct {
	// complexity bounds each operation's complexity as gqlgen computes it
	// without custom complexity functions: every field costs 1 plus the
	// cost of its selections; __schema and everything below it cost
	// nothing. complexity.Calculate gives the same numbers on valid
	// documents (TestComplexityAgreesWithGqlgen).
	complexity int
	// depth bounds how deeply an operation nests its fields; introspection
	// fields count as depth 1 (gqlparser's MaxIntrospectionDepth rule
	// bounds them, and GraphiQL's introspection query nests ofType far
	// deeper than any data query needs).
	depth int
	// selections bounds the selections (fields, fragment spreads, inline
	// fragments) of the whole document once fragments are expanded, the
	// operations and the fragment definitions each counted: it bounds the
	// work of validation, which walks each of them that way, and the
	// introspection queries the complexity does not count.
	selections int
	// introspection allows __schema and __type.
	introspection bool
}

// check refuses doc when it exceeds l. It returns how many selections it
// visited, which is at most the number of selections written in doc.
func (l limits) check(doc *ast.QueryDocument) (visited int, err *gqlerror.Error) {
	w := newCostWalker(doc)
	var total int
	ops := make([]cost, len(doc.Operations))
	for i, op := range doc.Operations {
		ops[i] = w.selections(op.SelectionSet)
		total = satAdd(total, ops[i].size)
	}
	for _, f := range doc.Fragments {
		total = satAdd(total, w.fragment(f.Name).size)
	}
	if w.introspects && !l.introspection {
		return w.visited, validationError("introspection is disabled")
	}
	for _, c := range ops {
		if c.complexity > l.complexity {
			err := gqlerror.Errorf("operation has complexity %d, which exceeds the limit of %d", c.complexity, l.complexity)
			errcode.Set(err, errComplexityLimit)
			return w.visited, err
		}
		if c.depth > l.depth {
			return w.visited, validationError("operation has depth %d, which exceeds the limit of %d", c.depth, l.depth)
		}
	}
	for _, f := range doc.Fragments {
		// A fragment costs no more than an operation that spreads it. One
		// on an introspection type is spread only below __schema or
		// __type, whose fields the complexity does not count.
		if c := w.fragment(f.Name); c.complexity > l.complexity && !strings.HasPrefix(f.TypeCondition, "__") {
			err := gqlerror.Errorf("fragment %s has complexity %d, which exceeds the limit of %d", f.Name, c.complexity, l.complexity)
			errcode.Set(err, errComplexityLimit)
			return w.visited, err
		}
	}
	if total > l.selections {
		return w.visited, validationError("document has %d selections once its fragments are expanded, which exceeds the limit of %d", total, l.selections)
	}
	return w.visited, nil
}

func validationError(format string, args ...any) *gqlerror.Error {
	err := gqlerror.Errorf(format, args...)
	errcode.Set(err, errcode.ValidationFailed)
	return err
}

// cost is what a selection set asks for once its fragments are expanded.
type cost struct {
	complexity int
	depth      int
	size       int // selections
}

func (c cost) plus(d cost) cost {
	return cost{
		complexity: satAdd(c.complexity, d.complexity),
		depth:      max(c.depth, d.depth),
		size:       satAdd(c.size, d.size),
	}
}

// satAdd adds two non-negative counts, saturating at math.MaxInt: a
// document of a few hundred doubling fragments is worth more than any int.
func satAdd(a, b int) int {
	if a > math.MaxInt-b {
		return math.MaxInt
	}
	return a + b
}

type fragmentCost struct {
	def   *ast.FragmentDefinition
	cost  cost
	state uint8 // 0 not measured, 1 being measured, 2 measured
}

// costWalker measures selection sets of one document, without relying on
// validation: fragment spreads are looked up by name, unknown fragments
// cost nothing and a fragment met again while it is being measured (a
// cycle, which validation refuses later) counts as nothing more.
type costWalker struct {
	fragments   map[string]*fragmentCost
	introspects bool
	visited     int
}

func newCostWalker(doc *ast.QueryDocument) *costWalker {
	w := &costWalker{fragments: make(map[string]*fragmentCost, len(doc.Fragments))}
	for _, f := range doc.Fragments {
		if _, dup := w.fragments[f.Name]; !dup { // validation refuses duplicates
			w.fragments[f.Name] = &fragmentCost{def: f}
		}
	}
	return w
}

func (w *costWalker) selections(set ast.SelectionSet) cost {
	var total cost
	for _, sel := range set {
		w.visited++
		var c cost
		switch s := sel.(type) {
		case *ast.Field:
			c = w.selections(s.SelectionSet)
			switch s.Name {
			case "__schema":
				w.introspects = true
				c = cost{complexity: 0, depth: 1, size: c.size}
			case "__type":
				w.introspects = true
				c.complexity = satAdd(c.complexity, 1)
				c.depth = 1
			default:
				c.complexity = satAdd(c.complexity, 1)
				c.depth++
			}
		case *ast.InlineFragment:
			c = w.selections(s.SelectionSet)
		case *ast.FragmentSpread:
			c = w.fragment(s.Name)
		}
		c.size = satAdd(c.size, 1)
		total = total.plus(c)
	}
	return total
}

// fragment returns the cost of the named fragment, measuring it the first
// time.
func (w *costWalker) fragment(name string) cost {
	f := w.fragments[name]
	if f == nil || f.state == 1 {
		return cost{}
	}
	if f.state == 0 {
		f.state = 1
		f.cost = w.selections(f.def.SelectionSet)
		f.state = 2
	}
	return f.cost
}

// documentLimits applies limits to every document the gqlgen server has
// not seen yet, before gqlgen parses and validates it (so a refused
// document is never validated, nor kept in the query cache). It parses the
// document itself; a document that does not parse is left to gqlgen,
// which reports the error.
type documentLimits struct {
	limits limits
	cache  graphql.Cache[*ast.QueryDocument] // gqlgen's: documents that passed
}

var _ interface {
	graphql.HandlerExtension
	graphql.OperationParameterMutator
} = documentLimits{}

func (documentLimits) ExtensionName() string { return "DocumentLimits" }

func (documentLimits) Validate(graphql.ExecutableSchema) error { return nil }

func (d documentLimits) MutateOperationParameters(ctx context.Context, params *graphql.RawParams) *gqlerror.Error {
	if _, ok := d.cache.Get(ctx, params.Query); ok {
		return nil
	}
	doc, err := parser.ParseQuery(&ast.Source{Input: params.Query})
	if err != nil {
		return nil
	}
	_, gerr := d.limits.check(doc)
	return gerr
}

// validationRules returns gqlparser's rules as the server runs them:
// without "Did you mean …" suggestions unless introspection is allowed
// (they would show the schema), and with at most maxValidationErrors
// errors, the last saying that more were left out. gqlgen's executor
// swaps the suggestion rules in or out by name after this (see
// Server.SetDisableSuggestion) but keeps a rule already present, so the
// rules returned here are the ones that run.
func validationRules(introspection bool) func() *rules.Rules {
	return func() *rules.Rules {
		r := rules.NewDefaultRules()
		if !introspection {
			for _, swap := range [][2]core.Rule{
				{rules.FieldsOnCorrectTypeRule, rules.FieldsOnCorrectTypeRuleWithoutSuggestions},
				{rules.KnownArgumentNamesRule, rules.KnownArgumentNamesRuleWithoutSuggestions},
				{rules.KnownTypeNamesRule, rules.KnownTypeNamesRuleWithoutSuggestions},
				{rules.ScalarLeafsRule, rules.ScalarLeafsRuleWithoutSuggestions},
				{rules.ValuesOfCorrectTypeRule, rules.ValuesOfCorrectTypeRuleWithoutSuggestions},
			} {
				r.RemoveRule(swap[0].Name)
				r.AddRule(swap[1].Name, swap[1].RuleFunc)
			}
		}
		n := 0 // errors of this validation, across its rules
		for name, rule := range r.GetInner() {
			r.ReplaceRule(name, func(observers *core.Events, addError core.AddErrFunc) {
				rule(observers, func(options ...core.ErrorOption) {
					n++
					switch {
					case n <= maxValidationErrors:
						addError(options...)
					case n == maxValidationErrors+1:
						addError(core.Message("too many validation errors: only the first %d are shown", maxValidationErrors))
					}
				})
			})
		}
		return r
	}
}
