/* payloads.c — field tables of the payouts service's messages. */
#include "payloads.h"

static const cs_field payout_fields[] = {
    CS_FIELD_U64(payout, id, CS_REQUIRED),
    CS_FIELD_U64(payout, amount_cents, CS_REQUIRED),
};
CS_TYPE(payout_type, payout, payout_fields);

static const cs_field paid_fields[] = {
    CS_FIELD_U64(paid, payout_id, CS_REQUIRED),
};
CS_TYPE(paid_type, paid, paid_fields);

static const cs_field page_view_fields[] = {
    CS_FIELD_STRING(page_view, page, CS_REQUIRED),
};
CS_TYPE(page_view_type, page_view, page_view_fields);

static const cs_field statement_line_fields[] = {
    CS_FIELD_U64(statement_line, payout_id, CS_REQUIRED),
    CS_FIELD_U64(statement_line, amount_cents, CS_REQUIRED),
};
CS_TYPE(statement_line_type, statement_line, statement_line_fields);
