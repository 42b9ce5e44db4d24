"""opsdk.dist"""
