"""opsdk.codegen"""
