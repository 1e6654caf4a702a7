"""Hand-written natural questions about Python's documentation topics, with their evidence.

Each question was written by reading the topic that answers it; next to it is a passage
(``evidence``) copied from that topic. The relevant documents of a question are every topic
whose text contains the evidence (several topics repeat each other: ``compound`` holds
``if``, ``for``, ``try``, ...; ``specialnames`` holds ``customization``,
``attribute-access``, ...), and ``expect`` must be among them, so a wrong label fails here:

    python examples/eval/export_pydoc_topics.py /tmp/pydoc-topics
    python examples/eval/natural_questions.py /tmp/pydoc-topics pydoc examples/eval/pydoc-natural.jsonl
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

# (question, topic that answers it, evidence copied from that topic)
QUESTIONS: list[tuple[str, str, str]] = [
    ("How do I check a condition while debugging and stop with an error if it is false?", "assert", "Assert statements are a convenient way to insert debugging assertions"),
    ("Does assert still run when Python is started with optimisation?", "assert", "when optimization is requested"),
    ("How does unpacking several values into several names work in an assignment?", "assignment", "the latter yielding a tuple) and assigns the single resulting object to each of the target lists"),
    ("What happens when I assign to a slice of a list?", "assignment", "If the target is a slicing"),
    ("How do I define a coroutine function?", "async", "Coroutine function definition"),
    ("How do I loop over an asynchronous iterator?", "async", "The \"async for\" statement"),
    ("What does the await expression do?", "await", "Suspend the execution of *coroutine* on an *awaitable* object"),
    ("Why do names starting with two underscores inside a class get renamed?", "atom-identifiers", "Private name mangling"),
    ("How can a class control what happens when an attribute is missing?", "attribute-access", "object.__getattr__(self, name)"),
    ("What are descriptors and how do __get__ and __set__ work?", "attribute-access", "Implementing Descriptors"),
    ("How do __slots__ save memory?", "attribute-access", "*__slots__* allow us to explicitly declare data members"),
    ("Can I customize attribute access on a module?", "attribute-access", "Customizing module attribute access"),
    ("What does x += 1 do compared to x = x + 1?", "augassign", "Augmented assignment is the combination, in a single statement"),
    ("What does the // operator return?", "binary", "The \"/\" (division) and \"//\" (floor division) operators yield the quotient"),
    ("What does the @ operator do?", "binary", "The \"@\" (at) operator is intended to be used for matrix multiplication"),
    ("How does the modulo operator handle negative numbers?", "binary", "The \"%\" (modulo) operator yields the remainder"),
    ("Which bitwise operator has the highest priority: and, xor or or?", "bitwise", "Each of the three bitwise operations has a different priority level"),
    ("What is a code object and how do I get one from a function?", "bltin-code-objects", "Code objects are used by the implementation to represent"),
    ("What is the Ellipsis object written as three dots?", "bltin-ellipsis-object", "It is written as \"Ellipsis\" or \"...\""),
    ("What is returned by a function without a return statement?", "bltin-null-object", "This object is returned by functions that don’t explicitly return a value"),
    ("How do I get the type of an object?", "bltin-type-objects", "An object’s type is accessed by the built-in function \"type()\""),
    ("Do and and or return booleans or one of their operands?", "booleans", "Note that neither \"and\" nor \"or\" restrict the value and type they return"),
    ("What values count as false in a boolean context?", "booleans", "the following values are interpreted as false"),
    ("How do I exit a loop early?", "break", "\"break\" may only occur syntactically nested in a \"for\" or \"while\" loop"),
    ("Does break skip the else clause of a loop?", "break", "terminates the nearest enclosing loop, skipping the optional \"else\" clause"),
    ("How can I make instances of my class callable like functions?", "callable-types", "Called when the instance is “called” as a function"),
    ("What happens with keyword arguments that do not match any parameter name?", "calls", "If any keyword argument does not correspond to a formal parameter name"),
    ("How does the *args syntax unpack an iterable in a function call?", "calls", "If the syntax \"*expression\" appears in the function call"),
    ("How do I define a class that inherits from another class?", "class", "The inheritance list usually gives a list of base classes"),
    ("What are class decorators?", "class", "Classes can also be decorated"),
    ("Can comparisons be chained like a < b < c?", "comparisons", "Comparisons can be chained arbitrarily"),
    ("What is the difference between is and ==?", "comparisons", "The operators \"is\" and \"is not\" test for an object’s identity"),
    ("Why is NaN not equal to itself?", "comparisons", "The not-a-number values \"float('NaN')\" and \"decimal.Decimal('NaN')\" are special"),
    ("How does the match statement do structural pattern matching?", "compound", "The \"match\" statement"),
    ("What are guards in a case block?", "compound", "Guards"),
    ("How do I write a generic function with type parameters?", "compound", "Type parameter lists"),
    ("What methods does an object need to be used in a with statement?", "context-managers", "A *context manager* is an object that defines the runtime context"),
    ("How do I skip to the next iteration of a loop?", "continue", "\"continue\" may only occur syntactically nested in a \"for\" or \"while\" loop"),
    ("What type is the result when I add an int and a float?", "conversions", "if either argument is a floating-point number, the other is converted to floating point"),
    ("What is the difference between __new__ and __init__?", "customization", "Called to create a new instance of class *cls*"),
    ("What should __repr__ return compared to __str__?", "customization", "Called by the \"repr()\" built-in function to compute the “official”"),
    ("How do I make my objects usable as dictionary keys?", "customization", "Called by built-in function \"hash()\""),
    ("When is __del__ called?", "customization", "Called when the instance is about to be destroyed"),
    ("How do I set a breakpoint in the Python debugger?", "debugger", "b(reak) [([filename:]lineno | function) [, condition]]"),
    ("How do I step into a function call with pdb?", "debugger", "Execute the current line, stop at the first possible occasion"),
    ("How can I start the debugger from the command line on a script?", "debugger", "python -m pdb"),
    ("How do I delete a variable or a list item?", "del", "Deletion of a target list recursively deletes each target"),
    ("How do I write a dictionary comprehension?", "dict", "A dict comprehension, in contrast to list and set comprehensions"),
    ("What happens with duplicate keys in a dict display?", "dict", "the final dictionary’s value for that key will be the last one given"),
    ("Are free variables resolved at compile time or at run time?", "dynamic-features", "Name resolution of free variables occurs at runtime"),
    ("How does an exception propagate when it is not handled?", "exceptions", "Python uses the “termination” model of error handling"),
    ("What is a code block in Python's execution model?", "execmodel", "A *block* is a piece of Python program text that is executed as a unit"),
    ("What is the builtins module and how are built-in names found?", "execmodel", "The builtins namespace associated with the execution of a code block"),
    ("How does a trailing comma create a tuple?", "exprlists", "A trailing comma is required only to create a one-item tuple"),
    ("How are floating-point literals written with exponents?", "floating", "Floating-point literals are described by the following lexical definitions"),
    ("Can I use underscores to group digits in a float literal?", "floating", "Changed in version 3.6: Underscores are now allowed for grouping purposes"),
    ("How do I iterate over the items of a list?", "for", "The \"for\" statement is used to iterate over the elements of a sequence"),
    ("When does the else clause of a for loop run?", "for", "When the iterator is exhausted, the suite in the \"else\" clause, if present, is executed"),
    ("How do I pad a number with zeros in a format string?", "formatstrings", "When no explicit alignment is given, preceding the *width* field by a zero"),
    ("How do I add a thousands separator when formatting numbers?", "formatstrings", "option signals the use of a comma for a thousands separator"),
    ("How do I center a string in a field of a given width?", "formatstrings", "Forces the field to be centered within the available"),
    ("What does the !r conversion in a format string do?", "formatstrings", "\"'!r'\" which calls \"repr()\""),
    ("How do I format a number as a percentage?", "formatstrings", "Expressing a percentage"),
    ("Why is a mutable default argument shared between calls?", "function", "Default parameter values are evaluated from left to right when the function definition is executed"),
    ("How do I make keyword-only parameters?", "function", "Parameters after “\"*\"” or “\"*identifier\"” are keyword-only parameters"),
    ("How are function annotations stored?", "function", "Parameters may have an *annotation* of the form"),
    ("What are function decorators and when are they applied?", "function", "A function definition may be wrapped by one or more *decorator* expressions"),
    ("How do I assign to a module-level variable inside a function?", "global", "The \"global\" statement is a declaration which holds for the entire current code block"),
    ("What do names with leading and trailing double underscores mean?", "id-classes", "System-defined names, informally known as “dunder” names"),
    ("What is the special meaning of a single underscore in the interactive interpreter?", "id-classes", "the interactive interpreter makes the result of the last evaluation available"),
    ("Which words are reserved keywords in Python?", "identifiers", "The following identifiers are used as reserved words, or *keywords* of the language"),
    ("What are soft keywords like match and case?", "identifiers", "Soft Keywords"),
    ("Can identifiers contain non-ASCII letters?", "identifiers", "Within the ASCII range (U+0001..U+007F), the valid characters for identifiers"),
    ("How does an if statement with elif branches choose what to run?", "if", "It selects exactly one of the suites by evaluating the expressions one by one"),
    ("How do I write a complex number literal?", "imaginary", "An imaginary literal yields a complex number with a real part of 0.0"),
    ("What is the difference between import x and from x import y?", "import", "The \"from\" form uses a slightly more complex process"),
    ("What does from module import * import?", "import", "If the list of identifiers is replaced by a star (\"'*'\")"),
    ("What are future statements such as from __future__ import annotations?", "import", "A *future statement* is a directive to the compiler"),
    ("How do relative imports with dots work?", "import", "When specifying what module to import you do not have to specify the absolute name of the module"),
    ("How does the in operator test membership in a custom class?", "in", "For user-defined classes which define the \"__contains__()\" method"),
    ("How do I write a binary or hexadecimal integer literal?", "integers", "Integer literals are described by the following lexical definitions"),
    ("Why are leading zeros not allowed in a decimal integer?", "integers", "leading zeros in a non-zero decimal number are not allowed"),
    ("How do I write a small anonymous function?", "lambda", "Lambda expressions (sometimes called lambda forms) are used to create anonymous functions"),
    ("How do I build a list with square brackets or a comprehension?", "lists", "A list display is a possibly empty series of expressions enclosed in square brackets"),
    ("What is the scope of a name bound inside a function?", "naming", "If a name is bound in a block, it is a local variable of that block"),
    ("Why do I get UnboundLocalError?", "naming", "If a name binding operation occurs anywhere within a code block"),
    ("How do class bodies affect the scope of names in methods?", "naming", "The scope of names defined in a class block is limited to the class block"),
    ("How can a nested function rebind a variable of the enclosing function?", "nonlocal", "The \"nonlocal\" statement causes the listed identifiers to refer to names previously bound in nonlocal scopes"),
    ("Is a minus sign part of a numeric literal?", "numbers", "Note that numeric literals do not include a sign"),
    ("How do I overload the + operator for my class?", "numeric-types", "These methods are called to implement the binary arithmetic operations"),
    ("What are reflected operand methods like __radd__?", "numeric-types", "with reflected (swapped) operands"),
    ("What is the difference between mutable and immutable objects?", "objects", "Objects whose value can change are said to be *mutable*"),
    ("Does Python garbage collect unreachable objects?", "objects", "Objects are never explicitly destroyed"),
    ("Which operators bind more tightly, not or comparisons?", "operator-summary", "The following table summarizes the operator precedence in Python"),
    ("What does the pass statement do?", "pass", "\"pass\" is a null operation"),
    ("What is -1 ** 2 in Python?", "power", "Thus, in an unparenthesized sequence of power and unary operators"),
    ("What does raising zero to a negative power do?", "power", "Raising \"0.0\" to a negative power results in a \"ZeroDivisionError\""),
    ("How do I chain exceptions with raise from?", "raise", "The \"from\" clause is used for exception chaining"),
    ("How do I re-raise the exception currently being handled?", "raise", "If no expressions are present, \"raise\" re-raises the exception that is currently being handled"),
    ("What does return do inside a generator?", "return", "In a generator function, the \"return\" statement indicates that the generator is done"),
    ("How do I make my class support len() and indexing?", "sequence-types", "Called to implement the built-in function \"len()\""),
    ("How do I make my container support iteration?", "sequence-types", "This method is called when an *iterator* is required for a container"),
    ("What does << do to an integer?", "shifting", "A left shift by *n* bits is defined as multiplication with \"pow(2,n)\""),
    ("How do I take a slice with a step?", "slicings", "A slicing selects a range of items in a sequence object"),
    ("What does __qualname__ contain?", "specialattrs", "Special Attributes"),
    ("How do I make objects sortable with < comparisons?", "specialnames", "These are the so-called “rich comparison” methods"),
    ("What does __init_subclass__ do?", "specialnames", "This method is called whenever the containing class is subclassed"),
    ("How do I customise the metaclass of a class?", "specialnames", "Metaclasses"),
    ("How do I remove whitespace from both ends of a string?", "string-methods", "Return a copy of the string with the leading and trailing characters removed"),
    ("How do I split a string on a separator?", "string-methods", "Return a list of the words in the string, using *sep* as the delimiter string"),
    ("How do I check whether a string starts with a prefix?", "string-methods", "Return \"True\" if string starts with the *prefix*"),
    ("How do I replace a substring in a string?", "string-methods", "Return a copy of the string with all occurrences of substring *old* replaced by *new*"),
    ("How do I join a list of strings with a separator?", "string-methods", "Return a string which is the concatenation of the strings in *iterable*"),
    ("What is a raw string literal and why use it for regular expressions?", "strings", "Both string and bytes literals may optionally be prefixed with a letter \"'r'\""),
    ("How do f-strings evaluate expressions inside braces?", "strings", "is a *formatted string literal*; see f-strings"),
    ("What escape sequences are recognised in string literals?", "strings", "Escape sequences"),
    ("How does indexing with a negative number work?", "subscriptions", "interprets negative indices by adding the length of the sequence to the index"),
    ("How do I handle an exception and always run cleanup code?", "try", "If \"finally\" is present, it specifies a ‘cleanup’ handler"),
    ("What are exception groups and except*?", "try", "The \"except*\" clause(s) are used for handling \"ExceptionGroup\"s"),
    ("When does the else clause of a try statement run?", "try", "The optional \"else\" clause is executed if the control flow leaves the \"try\" suite"),
    ("What attributes does a user-defined function object have?", "types", "Special read-only attributes"),
    ("What is a generator function?", "types", "A function or method which uses the \"yield\" statement"),
    ("What is a frozenset?", "types", "These represent an immutable set"),
    ("How do I add a key to a dictionary only if it is missing?", "typesmapping", "If *key* is in the dictionary, return its value. If not, insert *key*"),
    ("How do I merge two dictionaries with the | operator?", "typesmapping", "Create a new dictionary with the merged keys and values of *d* and *other*"),
    ("Do dictionaries preserve insertion order?", "typesmapping", "Dictionaries preserve insertion order"),
    ("What are dictionary view objects?", "typesmapping", "Dictionary view objects"),
    ("What is a bound method object?", "typesmethods", "If you access a method (a function defined in a class namespace) through an instance"),
    ("What is the __dict__ attribute of a module?", "typesmodules", "A special attribute of every module is \"__dict__\""),
    ("How do I sort a list in place?", "typesseq", "This method sorts the list in place"),
    ("Is list.sort stable?", "typesseq", "The \"sort()\" method is guaranteed to be stable"),
    ("How does range work and is it memory efficient?", "typesseq", "The advantage of the \"range\" type over a regular \"list\" or \"tuple\""),
    ("Why does multiplying a list of lists share the inner lists?", "typesseq", "Note that items in the sequence *s* are not copied; they are referenced multiple times"),
    ("How do I append or insert items into a list?", "typesseq-mutable", "appends *x* to the end of the"),
    ("How do I remove and return the last item of a list?", "typesseq-mutable", "retrieves the item at *i* and"),
    ("What does the ~ operator do to an integer?", "unary", "The unary \"~\" (invert) operator yields the bitwise inversion of its integer argument"),
    ("How do I repeat code while a condition is true?", "while", "The \"while\" statement is used for repeated execution as long as an expression is true"),
    ("How do I use several context managers in one with statement?", "with", "With more than one item, the context managers are processed as if multiple \"with\" statements were nested"),
    ("What does the with statement do with exceptions raised in its block?", "with", "The context manager’s \"__exit__()\" method is invoked"),
    ("How does yield turn a function into a generator?", "yield", "A \"yield\" statement is semantically equivalent to a yield expression"),
]


def _normal(text: str) -> str:
    return " ".join(text.split())


def labelled(folder: Path, source_id: str) -> list[dict[str, object]]:
    """The labelled questions; relevant documents are the topics containing the evidence.

    Raises:
        SystemExit: An evidence passage is in no topic, or not in its ``expect`` topic.
    """
    docs = {f"{source_id}/{p.name}": _normal(p.read_text(encoding="utf-8")) for p in sorted(folder.glob("*.txt"))}
    out: list[dict[str, object]] = []
    for question, expect, evidence in QUESTIONS:
        relevant = [d for d, text in docs.items() if _normal(evidence) in text]
        if f"{source_id}/{expect}.txt" not in relevant:
            sys.exit(f"evidence for {question!r} is not in topic {expect!r}: {evidence!r}")
        out.append({"question": question, "relevant_documents": relevant, "kind": "natural"})
    return out


def main() -> None:
    """Entry point: ``natural_questions.py FOLDER SOURCE_ID OUT.jsonl``."""
    if len(sys.argv) != 4:
        sys.exit("usage: natural_questions.py FOLDER SOURCE_ID OUT.jsonl")
    items = labelled(Path(sys.argv[1]), sys.argv[2])
    Path(sys.argv[3]).write_text("".join(json.dumps(i, ensure_ascii=False) + "\n" for i in items), encoding="utf-8")
    print(f"wrote {len(items)} natural questions to {sys.argv[3]}")


if __name__ == "__main__":
    main()
