//! Parser of the formula language.
//!
//! ```text
//! formula    = expr EOF ;
//! expr       = concat { cmp_op concat } ;                    (* lowest *)
//! cmp_op     = "=" | "!=" | "<>" | "<" | "<=" | ">" | ">=" ;
//! concat     = additive { "&" additive } ;
//! additive   = term { ("+" | "-") term } ;
//! term       = unary { ("*" | "/") unary } ;
//! unary      = ("-" | "+") unary | primary ;                 (* highest *)
//! primary    = number | text | field | call | name | "(" expr ")" ;
//! call       = ident "(" [ expr { "," expr } ] ")" ;         (* name case-insensitive *)
//! name       = ident ;            (* TRUE / FALSE are booleans, else a bare field name *)
//! field      = "{" { any char but "{", "}", "\" | "\\" | "\{" | "\}" } "}" ;
//! text       = '"' { char | escape } '"' | "'" { char | escape } "'" ;
//! escape     = "\\" | '\"' | "\'" | "\n" | "\t" | "\r" ;
//! number     = digits [ "." [digits] ] [ exponent ] | "." digits [ exponent ] ;
//! exponent   = ("e" | "E") [ "+" | "-" ] digits ;
//! ident      = (letter | "_") { letter | digit | "_" } ;
//! ```
//!
//! Binary operators are left-associative. Whitespace is free between tokens.
//! Limits: [`MAX_LEN`] characters of source, [`MAX_DEPTH`] levels of
//! parentheses / calls / unary operators, [`MAX_TREE_DEPTH`] levels of the
//! whole tree (long operator chains count).

use crate::error::{Res, SpanError};
use crate::lexer::{describe, tokenize, Tok, Token};

/// Longest accepted formula, in characters.
pub const MAX_LEN: usize = 10_000;
/// Deepest nesting of parentheses, function calls and unary operators.
pub const MAX_DEPTH: usize = 64;
/// Deepest syntax tree, counting every operator of a chain like `a+b+c`.
pub const MAX_TREE_DEPTH: usize = 256;

/// Byte range of a node in the source it was parsed from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    pub start: usize,
    pub end: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Expr {
    pub kind: ExprKind,
    pub span: Span,
    /// Height of this subtree (a leaf is 1).
    pub depth: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ExprKind {
    /// Decimal literal as written (validated: at most 1e300 in magnitude).
    Number(String),
    Text(String),
    Bool(bool),
    /// A field reference; `braced` is false for a bare name.
    Field {
        name: String,
        braced: bool,
    },
    Unary {
        op: UnaryOp,
        operand: Box<Expr>,
    },
    Binary {
        op: BinaryOp,
        left: Box<Expr>,
        right: Box<Expr>,
    },
    /// Function call; `name` is upper-cased.
    Call {
        name: String,
        name_span: Span,
        args: Vec<Expr>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnaryOp {
    Neg,
    Plus,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    Div,
    Concat,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl BinaryOp {
    pub fn symbol(self) -> &'static str {
        match self {
            BinaryOp::Add => "+",
            BinaryOp::Sub => "-",
            BinaryOp::Mul => "*",
            BinaryOp::Div => "/",
            BinaryOp::Concat => "&",
            BinaryOp::Eq => "=",
            BinaryOp::Ne => "!=",
            BinaryOp::Lt => "<",
            BinaryOp::Le => "<=",
            BinaryOp::Gt => ">",
            BinaryOp::Ge => ">=",
        }
    }
}

/// A parsed formula: the source it came from and its syntax tree. Spans in
/// the tree index into `source`.
#[derive(Debug, Clone, PartialEq)]
pub struct Formula {
    pub source: String,
    pub root: Expr,
}

pub(crate) fn parse_source(src: &str) -> Res<Expr> {
    if src.chars().count() > MAX_LEN {
        return Err(SpanError::new(
            0,
            format!("Formula is too long (at most {MAX_LEN} characters)"),
        ));
    }
    if src.trim().is_empty() {
        return Err(SpanError::new(0, "Formula is empty"));
    }
    let tokens = tokenize(src)?;
    let mut p = Parser {
        tokens,
        pos: 0,
        depth: 0,
    };
    let e = p.expr()?;
    let t = p.peek();
    if t.tok != Tok::Eof {
        return Err(SpanError::new(
            t.start,
            format!(
                "Unexpected {} after a complete expression",
                describe(&t.tok)
            ),
        ));
    }
    Ok(e)
}

struct Parser {
    tokens: Vec<Token>,
    pos: usize,
    depth: usize,
}

impl Parser {
    fn peek(&self) -> &Token {
        &self.tokens[self.pos.min(self.tokens.len() - 1)]
    }

    fn bump(&mut self) -> Token {
        let t = self.peek().clone();
        if self.pos < self.tokens.len() - 1 {
            self.pos += 1;
        }
        t
    }

    fn enter(&mut self, at: usize) -> Res<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(SpanError::new(
                at,
                format!("Formula is nested too deeply (at most {MAX_DEPTH} levels)"),
            ));
        }
        Ok(())
    }

    fn binary(&self, op: BinaryOp, left: Expr, right: Expr, at: usize) -> Res<Expr> {
        let span = Span {
            start: left.span.start,
            end: right.span.end,
        };
        let depth = 1 + left.depth.max(right.depth);
        if depth > MAX_TREE_DEPTH {
            return Err(SpanError::new(
                at,
                format!(
                    "Formula is too long a chain of operators (at most {MAX_TREE_DEPTH} levels)"
                ),
            ));
        }
        Ok(Expr {
            kind: ExprKind::Binary {
                op,
                left: Box::new(left),
                right: Box::new(right),
            },
            span,
            depth,
        })
    }

    fn expr(&mut self) -> Res<Expr> {
        let mut left = self.concat()?;
        loop {
            let op = match self.peek().tok {
                Tok::Eq => BinaryOp::Eq,
                Tok::Ne => BinaryOp::Ne,
                Tok::Lt => BinaryOp::Lt,
                Tok::Le => BinaryOp::Le,
                Tok::Gt => BinaryOp::Gt,
                Tok::Ge => BinaryOp::Ge,
                _ => return Ok(left),
            };
            let at = self.bump().start;
            let right = self.concat()?;
            left = self.binary(op, left, right, at)?;
        }
    }

    fn concat(&mut self) -> Res<Expr> {
        let mut left = self.additive()?;
        while self.peek().tok == Tok::Amp {
            let at = self.bump().start;
            let right = self.additive()?;
            left = self.binary(BinaryOp::Concat, left, right, at)?;
        }
        Ok(left)
    }

    fn additive(&mut self) -> Res<Expr> {
        let mut left = self.term()?;
        loop {
            let op = match self.peek().tok {
                Tok::Plus => BinaryOp::Add,
                Tok::Minus => BinaryOp::Sub,
                _ => return Ok(left),
            };
            let at = self.bump().start;
            let right = self.term()?;
            left = self.binary(op, left, right, at)?;
        }
    }

    fn term(&mut self) -> Res<Expr> {
        let mut left = self.unary()?;
        loop {
            let op = match self.peek().tok {
                Tok::Star => BinaryOp::Mul,
                Tok::Slash => BinaryOp::Div,
                _ => return Ok(left),
            };
            let at = self.bump().start;
            let right = self.unary()?;
            left = self.binary(op, left, right, at)?;
        }
    }

    fn unary(&mut self) -> Res<Expr> {
        let op = match self.peek().tok {
            Tok::Minus => UnaryOp::Neg,
            Tok::Plus => UnaryOp::Plus,
            _ => return self.primary(),
        };
        let t = self.bump();
        self.enter(t.start)?;
        let operand = self.unary()?;
        self.depth -= 1;
        let span = Span {
            start: t.start,
            end: operand.span.end,
        };
        let depth = 1 + operand.depth;
        if depth > MAX_TREE_DEPTH {
            return Err(SpanError::new(t.start, "Formula is nested too deeply"));
        }
        Ok(Expr {
            kind: ExprKind::Unary {
                op,
                operand: Box::new(operand),
            },
            span,
            depth,
        })
    }

    fn primary(&mut self) -> Res<Expr> {
        let t = self.bump();
        let span = Span {
            start: t.start,
            end: t.end,
        };
        let kind = match t.tok {
            Tok::Number(n) => ExprKind::Number(n),
            Tok::Str(s) => ExprKind::Text(s),
            Tok::Field(name) => ExprKind::Field { name, braced: true },
            Tok::LParen => {
                self.enter(t.start)?;
                let inner = self.expr()?;
                self.depth -= 1;
                let close = self.bump();
                if close.tok != Tok::RParen {
                    return Err(SpanError::new(
                        close.start,
                        format!(
                            "Expected ')' to close the '(' at character {}, found {}",
                            t.start + 1,
                            describe(&close.tok)
                        ),
                    ));
                }
                return Ok(inner);
            }
            Tok::Ident(name) => {
                if self.peek().tok == Tok::LParen {
                    return self.call(name, span);
                }
                match name.to_ascii_uppercase().as_str() {
                    "TRUE" => ExprKind::Bool(true),
                    "FALSE" => ExprKind::Bool(false),
                    _ => ExprKind::Field {
                        name,
                        braced: false,
                    },
                }
            }
            other => {
                return Err(SpanError::new(
                    t.start,
                    format!("Expected a value, found {}", describe(&other)),
                ))
            }
        };
        Ok(Expr {
            kind,
            span,
            depth: 1,
        })
    }

    fn call(&mut self, name: String, name_span: Span) -> Res<Expr> {
        self.enter(name_span.start)?;
        self.bump(); // '('
        let mut args = Vec::new();
        if self.peek().tok == Tok::RParen {
            self.bump();
        } else {
            loop {
                args.push(self.expr()?);
                let t = self.bump();
                match t.tok {
                    Tok::Comma => continue,
                    Tok::RParen => break,
                    other => {
                        return Err(SpanError::new(
                            t.start,
                            format!(
                                "Expected ',' or ')' in the arguments of {}, found {}",
                                name.to_ascii_uppercase(),
                                describe(&other)
                            ),
                        ))
                    }
                }
            }
        }
        self.depth -= 1;
        let end = self.tokens[self.pos.saturating_sub(1)].end;
        let depth = 1 + args.iter().map(|a| a.depth).max().unwrap_or(0);
        if depth > MAX_TREE_DEPTH {
            return Err(SpanError::new(
                name_span.start,
                "Formula is nested too deeply",
            ));
        }
        Ok(Expr {
            kind: ExprKind::Call {
                name: name.to_ascii_uppercase(),
                name_span,
                args,
            },
            span: Span {
                start: name_span.start,
                end,
            },
            depth,
        })
    }
}
