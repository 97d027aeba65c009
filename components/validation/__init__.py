"""The data gate's components: CuratedSchemaGen decides the schema, DataGate judges a span."""
