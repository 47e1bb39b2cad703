//! Costumes (the field `type`) and their storage kinds (part A).

/// The nine storage kinds of part A, plus `None` for a button (which has
/// text storage in part A's table but no column and no value).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StorageKind {
    Text,
    LongText,
    Number,
    Date,
    Checkbox,
    SingleSelect,
    MultiSelect,
    Link,
    Attachment,
    None,
}

impl StorageKind {
    /// Part A's name of the kind (`none` for a button).
    pub const fn as_str(self) -> &'static str {
        match self {
            StorageKind::Text => "text",
            StorageKind::LongText => "long_text",
            StorageKind::Number => "number",
            StorageKind::Date => "date",
            StorageKind::Checkbox => "checkbox",
            StorageKind::SingleSelect => "single_select",
            StorageKind::MultiSelect => "multi_select",
            StorageKind::Link => "link",
            StorageKind::Attachment => "attachment",
            StorageKind::None => "none",
        }
    }
}

macro_rules! costumes {
    ($($variant:ident => $name:literal),* $(,)?) => {
        /// One of the 28 stored costumes.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Costume { $($variant),* }

        impl Costume {
            /// Every stored costume, in part A's order.
            pub const ALL: &'static [Costume] = &[$(Costume::$variant),*];

            pub const fn as_str(self) -> &'static str {
                match self { $(Costume::$variant => $name),* }
            }
        }
    };
}

costumes! {
    SingleLineText => "single_line_text",
    LongText => "long_text",
    Email => "email",
    Phone => "phone",
    Url => "url",
    Number => "number",
    Currency => "currency",
    Percent => "percent",
    Rating => "rating",
    Duration => "duration",
    Date => "date",
    Checkbox => "checkbox",
    Member => "member",
    MultiMember => "multi_member",
    SingleSelect => "single_select",
    MultiSelect => "multi_select",
    Link => "link",
    Attachment => "attachment",
    Button => "button",
    FormulaNumber => "formula_number",
    FormulaText => "formula_text",
    FormulaDate => "formula_date",
    LookupText => "lookup_text",
    LookupNumber => "lookup_number",
    LookupDate => "lookup_date",
    LookupCheckbox => "lookup_checkbox",
    RollupNumber => "rollup_number",
    RollupDate => "rollup_date",
}

/// The family a costume's settings and behaviour belong to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// An ordinary stored column (text, number, date, checkbox, member, ...).
    Scalar,
    Select,
    Link,
    Attachment,
    Button,
    Formula,
    Lookup,
    Rollup,
}

/// The one-word doors `type` also accepts on create.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Door {
    Formula,
    Lookup,
    Rollup,
}

/// What a create's `type` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Requested {
    Stored(Costume),
    Door(Door),
}

impl Requested {
    pub fn parse(s: &str) -> Option<Requested> {
        match s {
            "formula" => Some(Requested::Door(Door::Formula)),
            "lookup" => Some(Requested::Door(Door::Lookup)),
            "rollup" => Some(Requested::Door(Door::Rollup)),
            other => Costume::parse(other).map(Requested::Stored),
        }
    }

    /// The family (a concrete formula/lookup/rollup costume on create is
    /// treated as its door: the concrete costume is always inferred).
    pub fn family(self) -> Family {
        match self {
            Requested::Stored(c) => c.family(),
            Requested::Door(Door::Formula) => Family::Formula,
            Requested::Door(Door::Lookup) => Family::Lookup,
            Requested::Door(Door::Rollup) => Family::Rollup,
        }
    }
}

/// `Unknown field type 'x'. Valid types: ...` (the doors are not listed).
pub fn unknown_type_message(requested: &str) -> String {
    let valid: Vec<&str> = Costume::ALL.iter().map(|c| c.as_str()).collect();
    format!(
        "Unknown field type '{requested}'. Valid types: {}.",
        valid.join(", ")
    )
}

impl Costume {
    pub fn parse(s: &str) -> Option<Costume> {
        Costume::ALL.iter().copied().find(|c| c.as_str() == s)
    }

    pub fn family(self) -> Family {
        use Costume::*;
        match self {
            SingleSelect | MultiSelect => Family::Select,
            Link => Family::Link,
            Attachment => Family::Attachment,
            Button => Family::Button,
            FormulaNumber | FormulaText | FormulaDate => Family::Formula,
            LookupText | LookupNumber | LookupDate | LookupCheckbox => Family::Lookup,
            RollupNumber | RollupDate => Family::Rollup,
            _ => Family::Scalar,
        }
    }

    /// Part A's storage kind. Lookups and rollups report the kind of their
    /// value; formulas the kind of their result.
    pub fn storage(self) -> StorageKind {
        use Costume::*;
        match self {
            SingleLineText | Email | Phone | Url | Member => StorageKind::Text,
            FormulaText | LookupText => StorageKind::Text,
            LongText => StorageKind::LongText,
            Number | Currency | Percent | Rating | Duration => StorageKind::Number,
            FormulaNumber | LookupNumber | RollupNumber => StorageKind::Number,
            Date | FormulaDate | LookupDate | RollupDate => StorageKind::Date,
            Checkbox | LookupCheckbox => StorageKind::Checkbox,
            SingleSelect => StorageKind::SingleSelect,
            MultiSelect | MultiMember => StorageKind::MultiSelect,
            Costume::Link => StorageKind::Link,
            Attachment => StorageKind::Attachment,
            Button => StorageKind::None,
        }
    }

    /// Whether the field is stored in a column the user writes.
    pub fn is_computed(self) -> bool {
        matches!(
            self.family(),
            Family::Formula | Family::Lookup | Family::Rollup
        )
    }

    /// The SQL type of an ordinary (non-formula) column; `None` for
    /// costumes without a column.
    pub fn column_type(self, include_time: bool) -> Option<&'static str> {
        match self.family() {
            Family::Link | Family::Button | Family::Lookup | Family::Rollup => None,
            Family::Formula => None, // decided by the expression's result
            Family::Attachment => Some("text[]"),
            Family::Select | Family::Scalar => Some(match self.storage() {
                StorageKind::Text | StorageKind::LongText | StorageKind::SingleSelect => "text",
                StorageKind::Number => "numeric",
                StorageKind::Date if include_time => "timestamptz",
                StorageKind::Date => "date",
                StorageKind::Checkbox => "boolean",
                StorageKind::MultiSelect => "text[]",
                StorageKind::Link | StorageKind::Attachment | StorageKind::None => return None,
            }),
        }
    }

    /// Whether `unique` builds a partial UNIQUE index (part A's list).
    pub fn supports_unique(self) -> bool {
        use Costume::*;
        matches!(
            self,
            SingleLineText
                | Email
                | Phone
                | Url
                | Number
                | Currency
                | Percent
                | Date
                | SingleSelect
        )
    }

    /// Whether the costume can name a record (be the display field).
    pub fn can_name_record(self) -> bool {
        !matches!(
            self.family(),
            Family::Link | Family::Attachment | Family::Button | Family::Lookup | Family::Rollup
        ) && self != Costume::Checkbox
    }

    /// Omitted from `GET .../fields?writable=true`.
    pub fn is_writable(self) -> bool {
        !matches!(
            self.family(),
            Family::Formula | Family::Lookup | Family::Rollup | Family::Button | Family::Attachment
        )
    }
}

/// Every known `options` key: part A's one flat, shared set.
pub const KNOWN_OPTION_KEYS: &[&str] = &[
    "unique",
    "rich",
    "decimals",
    "separators",
    "symbol",
    "symbol_position",
    "max",
    "shape",
    "color",
    "duration_format",
    "include_time",
    "date_format",
    "time_format",
    "icon",
    "checked_color",
    "unchecked_color",
    "choices",
    "target_table_id",
    "allow_multiple",
    "reverse_field_name",
    "conditions",
    "picker_field_ids",
    "direction",
    "pair_field_id",
    "label",
    "action",
    "webhook_id",
    "url_template",
    "condition",
    "expression",
    "display_as",
    "referenced_field_ids",
    "link_field_id",
    "target_field_id",
    "aggregation",
    "source_presentation",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn twenty_eight_costumes_round_trip() {
        assert_eq!(Costume::ALL.len(), 28);
        for c in Costume::ALL {
            assert_eq!(Costume::parse(c.as_str()), Some(*c));
        }
        assert_eq!(
            Requested::parse("formula"),
            Some(Requested::Door(Door::Formula))
        );
        assert!(!unknown_type_message("x").contains(" formula,"));
        assert!(unknown_type_message("x").contains("formula_text"));
    }

    #[test]
    fn display_field_costumes() {
        assert!(Costume::SingleLineText.can_name_record());
        assert!(Costume::FormulaText.can_name_record());
        assert!(!Costume::Checkbox.can_name_record());
        assert!(!Costume::Attachment.can_name_record());
        assert!(!Costume::LookupText.can_name_record());
    }
}
